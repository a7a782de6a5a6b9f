"""Adapters for agent frameworks, one module each, each behind its own extra. This package imports no framework."""
