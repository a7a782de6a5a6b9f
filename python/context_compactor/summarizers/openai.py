"""The OpenAI SDK summarizer: :func:`openai_chat` (Chat Completions, ``max_completion_tokens``).

The SDK is not imported here: install ``context-compactor[openai]`` for the client you pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

from context_compactor.results import SummaryRequest
from context_compactor.summarizers._base import (
    _TOKEN_LIMIT_KEYS,
    AsyncSummarizer,
    Summarizer,
    _check_params,
    _check_signature,
    _client_attr,
    _openai_response,
    sdk_summarizer,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["openai_chat"]

#: Request fields the wrapper sets itself (or that would break a summary call).
_OPENAI_RESERVED = frozenset({"model", "messages", "stream", "tools", "tool_choice", "functions", "function_call"})


@overload
def openai_chat(client: AsyncOpenAI, model: str, **params: Any) -> AsyncSummarizer: ...
@overload
def openai_chat(client: OpenAI, model: str, **params: Any) -> Summarizer: ...
@overload
def openai_chat(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer: ...
def openai_chat(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer:
    """A summarizer that calls ``client.chat.completions.create``.

    Sends ``model``, ``request.messages`` (system + user, no tools) and
    ``max_completion_tokens=request.max_tokens`` (the field reasoning models require) plus
    ``params``. Pass ``max_completion_tokens=`` to give a reasoning model room beyond the
    summary cap, or ``max_tokens=`` for an older deployment that only knows that field (then
    ``max_completion_tokens`` is not sent). ``timeout=`` is the SDK's per-request timeout.

    Args:
        client: ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (or an Azure client); an async
            client gives an :class:`AsyncSummarizer`.
        model: The model, e.g. ``"gpt-4o-mini"``.
        **params: More ``create()`` arguments (``temperature``, ``reasoning_effort``,
            ``timeout``, ``extra_headers``, …; checked against the client's ``create()`` signature).

    Returns:
        A :class:`Summarizer` or :class:`AsyncSummarizer` returning ``SummaryResponse(text,
        truncated=finish_reason == "length", usage=response.usage)``.

    Raises:
        TypeError: ``params`` sets a field the wrapper sets (``model``, ``messages``) or one a
            summary must not have (``tools``, ``stream``, …) or one the client's ``create()``
            does not take, or ``client`` has no Chat Completions.

    Example:
        >>> import openai
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import openai_chat
        >>> compactor = ContextCompactor(summarizer=openai_chat(openai.OpenAI(), "gpt-4o-mini"))
        >>> result = compactor.compact(messages)
    """
    _check_params("openai_chat", params, _OPENAI_RESERVED)
    create = _client_attr("openai_chat", client, "chat.completions.create")
    _check_signature("openai_chat", create, params)
    limit_given = bool(params.keys() & _TOKEN_LIMIT_KEYS)

    def arguments(request: SummaryRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": model, "messages": request.messages}
        if not limit_given:
            kw["max_completion_tokens"] = request.max_tokens
        kw.update(params)
        return kw

    return sdk_summarizer("openai_chat", model, client, params, create, arguments, _openai_response)
