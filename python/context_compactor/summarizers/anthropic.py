"""The Anthropic SDK summarizer: :func:`anthropic_messages` (Messages, the system prompt as ``system``).

The SDK is not imported here: install ``context-compactor[anthropic]`` for the client you pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

from context_compactor.results import SummaryRequest, SummaryResponse
from context_compactor.summarizers._base import (
    AsyncSummarizer,
    Summarizer,
    _check_params,
    _check_signature,
    _client_attr,
    _field,
    sdk_summarizer,
)

if TYPE_CHECKING:
    from anthropic import (
        Anthropic,
        AnthropicBedrock,
        AnthropicVertex,
        AsyncAnthropic,
        AsyncAnthropicBedrock,
        AsyncAnthropicVertex,
    )

__all__ = ["anthropic_messages"]

_ANTHROPIC_RESERVED = frozenset({"model", "system", "messages", "stream", "tools", "tool_choice"})
#: Anthropic stop reasons that mean the reply was cut off.
_ANTHROPIC_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


def _anthropic_response(response: Any) -> SummaryResponse:
    """A Messages reply as a :class:`SummaryResponse`: the text blocks joined, thinking skipped."""
    blocks = _field(response, "content") or ()
    text = "".join(str(_field(b, "text") or "") for b in blocks if _field(b, "type") == "text")
    return SummaryResponse(
        text,
        truncated=_field(response, "stop_reason") in _ANTHROPIC_TRUNCATED,
        usage=_field(response, "usage"),
    )


@overload
def anthropic_messages(
    client: AsyncAnthropic | AsyncAnthropicBedrock | AsyncAnthropicVertex, model: str, **params: Any
) -> AsyncSummarizer: ...
@overload
def anthropic_messages(
    client: Anthropic | AnthropicBedrock | AnthropicVertex, model: str, **params: Any
) -> Summarizer: ...
@overload
def anthropic_messages(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer: ...
def anthropic_messages(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer:
    """A summarizer that calls ``client.messages.create``.

    Sends ``model``, ``system=request.system_prompt``, one user message with
    ``request.user_prompt``, ``max_tokens=request.max_tokens`` and ``params``; never tools. The
    reply's text blocks are joined (thinking blocks are skipped); ``truncated`` is
    ``stop_reason == "max_tokens"`` (or ``"model_context_window_exceeded"``). Pass
    ``max_tokens=`` to override the cap (e.g. to leave room for ``thinking=``).

    Args:
        client: ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` (or a Bedrock / Vertex
            client); an async client gives an :class:`AsyncSummarizer`.
        model: The model, e.g. ``"claude-haiku-4-5"``.
        **params: More ``create()`` arguments (``thinking``, ``metadata``, ``timeout``,
            ``extra_body``, …; checked against the client's ``create()`` signature).

    Returns:
        A :class:`Summarizer` or :class:`AsyncSummarizer` returning ``SummaryResponse(text,
        truncated, usage=response.usage)``.

    Raises:
        TypeError: ``params`` sets ``model``, ``system``, ``messages``, ``tools``,
            ``tool_choice`` or ``stream``, or one the client's ``create()`` does not take, or
            ``client`` has no Messages API.

    Example:
        >>> import anthropic
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import anthropic_messages
        >>> summarize = anthropic_messages(anthropic.AsyncAnthropic(), "claude-haiku-4-5")
        >>> import asyncio
        >>> result = asyncio.run(ContextCompactor(max_context_tokens=3_000, summarizer=summarize).acompact(messages))
        >>> result.summary_source
        'llm'
    """
    _check_params("anthropic_messages", params, _ANTHROPIC_RESERVED)
    create = _client_attr("anthropic_messages", client, "messages.create")
    _check_signature("anthropic_messages", create, params)

    def arguments(request: SummaryRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": model,
            "system": request.system_prompt,
            "messages": [{"role": "user", "content": request.user_prompt}],
            "max_tokens": request.max_tokens,
        }
        kw.update(params)
        return kw

    return sdk_summarizer("anthropic_messages", model, client, params, create, arguments, _anthropic_response)
