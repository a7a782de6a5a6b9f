"""Adapters for agent frameworks and provider SDKs, one module each, each behind its own extra.

- :mod:`context_compactor.integrations.langchain` (``pip install "context-compactor[langchain]"``):
  LangChain / LangGraph ``BaseMessage`` lists and the v1 agent middleware
  ``ContextCompactorMiddleware``.
- :mod:`context_compactor.integrations.pydantic_ai` (``pip install "context-compactor[pydantic-ai]"``):
  pydantic-ai ``ModelMessage`` lists and a history processor for ``ProcessHistory``.
- :mod:`context_compactor.integrations.agents` (``pip install "context-compactor[agents]"``):
  the OpenAI Agents SDK: a compacting session and a ``call_model_input_filter``.
- :mod:`context_compactor.integrations.gemini` (``pip install "context-compactor[gemini]"``):
  ``google-genai`` ``contents``, and a chat that compacts itself.

This package imports no framework: only importing one of its modules does.
"""
