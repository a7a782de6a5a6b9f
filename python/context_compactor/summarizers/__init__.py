"""Ready summarizers (a package: ``_base``, ``openai``, ``anthropic``, ``http``; the providers' own
compaction strategies are in ``native``): the OpenAI and Anthropic SDKs, and any OpenAI-compatible HTTP server.

Each factory returns a callable ``SummaryRequest -> SummaryResponse`` to pass as
``ContextCompactor(summarizer=...)``. ``truncated`` comes from the finish/stop reason and
``usage`` is the provider's usage object, so the compactor can tell a cut-off summary apart.

- :func:`openai_chat` wraps ``openai.OpenAI`` / ``openai.AsyncOpenAI`` (and Azure's clients):
  Chat Completions with ``max_completion_tokens`` (reasoning models require it).
- :func:`anthropic_messages` wraps ``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic`` (and
  the Bedrock / Vertex clients): Messages with the system prompt as ``system``, no tools.
- :func:`openai_compatible` / :func:`async_openai_compatible` speak plain HTTP (standard library
  only) to vLLM, Ollama, llama.cpp, LM Studio and similar servers: ``POST
  {base_url}/chat/completions`` with ``max_tokens``, which those servers accept.
- :func:`openai_responses_compact` / :func:`anthropic_compaction` (module ``native``): the
  provider compacts the span itself (``responses.compact``, the Anthropic compaction beta) and
  its items replace it; on any failure the local summary runs with ``fallback_reason`` set.

The SDK wrappers are sync or async after the client (an async client gives an ``async``
callable; use it with ``await compactor.acompact(...)``). Neither SDK is imported by this module:
install the extra you use, ``context-compactor[openai]`` or ``context-compactor[anthropic]``.

Errors are not caught here: they reach the compactor's failure ladder as they are. The SDKs'
own classes (``RateLimitError``, ``OverloadedError``, ``AuthenticationError``, …) are recognised
by name; :func:`openai_compatible` raises :class:`HTTPStatusError` (with ``status_code``) for an
HTTP error status, ``TimeoutError`` and ``ConnectionError`` for network failures, and
:class:`ResponseFormatError` for a reply that is not a chat completion. API keys never appear in
a ``repr``, an error message or a log record.
"""

from __future__ import annotations

from context_compactor.summarizers._base import AsyncSummarizer, ResponseFormatError, Summarizer
from context_compactor.summarizers.anthropic import anthropic_messages
from context_compactor.summarizers.http import HTTPStatusError, async_openai_compatible, openai_compatible
from context_compactor.summarizers.native import (
    ProviderCompactionError,
    anthropic_compaction,
    openai_responses_compact,
)
from context_compactor.summarizers.openai import openai_chat

__all__ = [
    "AsyncSummarizer",
    "HTTPStatusError",
    "ProviderCompactionError",
    "ResponseFormatError",
    "Summarizer",
    "anthropic_compaction",
    "anthropic_messages",
    "async_openai_compatible",
    "openai_chat",
    "openai_compatible",
    "openai_responses_compact",
]
