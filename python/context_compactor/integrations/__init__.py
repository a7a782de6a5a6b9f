"""Adapters for agent frameworks, one module each, each behind its own extra.

- :mod:`context_compactor.integrations.langchain` (``pip install "context-compactor[langchain]"``):
  LangChain / LangGraph ``BaseMessage`` lists and the v1 agent middleware
  ``ContextCompactorMiddleware``.
- :mod:`context_compactor.integrations.pydantic_ai` (``pip install "context-compactor[pydantic-ai]"``):
  pydantic-ai ``ModelMessage`` lists and a history processor for ``ProcessHistory``.

This package imports no framework: only importing one of its modules does.
"""
