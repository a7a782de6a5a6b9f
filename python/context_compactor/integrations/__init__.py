"""Adapters for agent frameworks and provider SDKs, one module each, each behind its own extra
(``pip install "context-compactor[gemini]"``). Importing this package imports no framework."""
