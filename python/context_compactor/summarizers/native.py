"""Native compaction: the provider summarises, our planner still decides when and what.

Design note
-----------
- **OpenAI** (``client.responses.compact``, openai SDK 3.54: ``compact(*, model, input,
  instructions, previous_response_id, prompt_cache_key, ..., extra_body, timeout)`` returning a
  ``CompactedResponse`` whose ``output`` is "a list of all user messages, followed by a single
  compaction item"; guides: https://developers.openai.com/api/docs/guides/compaction and
  https://developers.openai.com/api/docs/guides/conversation-state#managing-the-context-window).
  The span is sent as ``input`` (it must be Responses items: the output can only be placed in a
  Responses conversation) and ``output`` replaces it as it is, between the kept head and tail.
- **Anthropic** (``client.beta.messages.create(..., compaction={"type": "summarize"},
  betas=["compact-2026-09-04"])``; anthropic SDK 2.12 has the ``compaction`` parameter
  (``BetaCompactionConfigParam``: ``type``, optional ``instructions``) and documents it: "the
  conversation in ``messages`` is summarized and the response holds only the resulting
  ``compaction`` block (``stop_reason`` ``"compaction"``), which later requests send first in
  ``messages`` in place of the messages it summarizes"). The block (``content``,
  ``encrypted_content``, ``signature``, ``tool_changes``: round-tripped verbatim) goes in an
  assistant message that opens the conversation; the task is re-sent right after it unless the
  block's ``content`` holds its opening words (DESIGN, "Provider compaction output").
- The placement is shell code around ``plan()``/``apply()`` (``_provider_items``): the plan is
  applied with the rule summary (micro-compaction first, a legal cut that never ends on an
  unanswered call, the task), then the one summary message is swapped for the provider's items;
  must-keep facts they do not show (OpenAI's item is encrypted) follow as a "Preserved details"
  user message; the result must pass ``validate_messages``, else the local summary runs.
- Any failure of the provider call (an unsupported model, a 4xx or 5xx, a timeout, a reply
  without a compaction item, a span in another format) raises :class:`ProviderCompactionError`,
  which the compactor treats as transient: the local (rule) summary runs with
  ``fallback_reason`` naming the provider's error. The span is sent whole (not chunked);
  ``request.span`` holds the input messages as given (before micro-compaction, which only
  concerns what is kept).
- Neither SDK is imported here: install ``context-compactor[openai]`` / ``[anthropic]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from context_compactor._summarize import describe
from context_compactor.results import SummaryRequest, SummaryResponse
from context_compactor.summarizers._base import (
    AsyncSummarizer,
    Summarizer,
    _check_params,
    _client_attr,
    _field,
    sdk_summarizer,
)

__all__ = ["ANTHROPIC_COMPACTION_BETA", "ProviderCompactionError", "anthropic_compaction", "openai_responses_compact"]

#: The Anthropic beta that enables the explicit compaction request.
ANTHROPIC_COMPACTION_BETA = "compact-2026-09-04"

_OPENAI_RESERVED = frozenset({"model", "input", "previous_response_id"})
_ANTHROPIC_RESERVED = frozenset({"model", "messages", "compaction", "stream", "tools", "tool_choice"})


class ProviderCompactionError(Exception):
    """The provider's compaction failed or cannot be used; the compactor runs the local summary.

    Example:
        >>> from context_compactor.summarizers import ProviderCompactionError
        >>> str(ProviderCompactionError("openai responses.compact: BadRequestError: model not supported"))
        'openai responses.compact: BadRequestError: model not supported'
    """


def _dump(obj: Any) -> Any:
    """An SDK model as a plain JSON dict (``None`` fields left out), a dict as it is."""
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        raise ProviderCompactionError(f"unexpected item type {type(obj).__name__}")
    return dump(mode="json", exclude_none=True, warnings=False)


def _is_responses_item(m: Any) -> bool:
    return isinstance(m, Mapping) and ("type" in m or ("role" in m and "tool_calls" not in m))


def _openai_items(response: Any) -> SummaryResponse:
    items = [_dump(i) for i in (_field(response, "output") or ())]
    if not items or items[-1].get("type") != "compaction":
        raise ProviderCompactionError("openai responses.compact returned no compaction item")
    return SummaryResponse("", usage=_field(response, "usage"), items=tuple(items), summary_source="provider:openai")


def _anthropic_items(response: Any) -> SummaryResponse:
    blocks = [_dump(b) for b in (_field(response, "content") or ())]
    found = [b for b in blocks if b.get("type") == "compaction"]
    if len(found) != 1 or found[0].get("content") is None:
        raise ProviderCompactionError("anthropic compaction returned no compaction block with content")
    block = found[0]
    return SummaryResponse(
        block["content"],
        usage=_field(response, "usage"),
        items=({"role": "assistant", "content": [block]},),
        summary_source="provider:anthropic",
    )


def _make(fn: str, model: str, client: Any, params: Mapping[str, Any], call: Any, build: Any, parse: Any) -> Any:
    """A (sync or async) summarizer around ``call(**build(request))``, any error it raises wrapped
    in :class:`ProviderCompactionError` (the compactor's fallback takes it as transient)."""
    s: Any = sdk_summarizer(
        fn, model, client, params, call, build, parse, lambda e: ProviderCompactionError(f"{fn}: {describe(e)}")
    )
    s.wants_span = True
    return s


def openai_responses_compact(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer:
    """A native strategy: OpenAI compacts the span with ``client.responses.compact``.

    The span (Responses items) is sent as ``input``; the returned user messages and the one
    ``compaction`` item replace it as they are (``summary_source="provider:openai"``). A failure
    (an unsupported model, 4xx, 5xx, timeout, a span that is not Responses items) makes the
    compactor run the local summary with ``fallback_reason`` set.

    Args:
        client: ``openai.OpenAI`` or ``openai.AsyncOpenAI``; an async client gives an
            :class:`AsyncSummarizer`.
        model: A model the compaction endpoint accepts, e.g. ``"gpt-5.4"``.
        **params: More ``compact()`` arguments (``instructions``, ``prompt_cache_key``,
            ``timeout``, ``extra_headers``, …).

    Raises:
        TypeError: ``params`` sets ``model``, ``input`` or ``previous_response_id``, or the client
            has no ``responses.compact``.

    Example:
        >>> import openai
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import openai_responses_compact
        >>> compactor = ContextCompactor(summarizer=openai_responses_compact(openai.OpenAI(), "gpt-5.4"))
        >>> result = compactor.compact(items)  # Responses items
    """
    fn = "openai_responses_compact"
    _check_params(fn, params, _OPENAI_RESERVED)
    compact = _client_attr(fn, client, "responses.compact")

    def build(request: SummaryRequest) -> dict[str, Any]:
        span = list(request.span)
        if not span or not all(_is_responses_item(m) for m in span):
            raise ProviderCompactionError(f"{fn}: the span is not Responses items (responses.compact needs them)")
        return {"model": model, "input": span, **params}

    return _make(fn, model, client, params, compact, build, _openai_items)  # type: ignore[no-any-return]


def anthropic_compaction(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer:
    """A native strategy: Anthropic compacts the span with an explicit compaction request.

    Calls ``client.beta.messages.create(model=..., messages=span, max_tokens=...,
    compaction={"type": "summarize"}, betas=["compact-2026-09-04"])``; the returned
    ``compaction`` block, in an assistant message, opens the compacted conversation
    (``summary_source="provider:anthropic"``). A span that starts with an assistant message gets
    a short user message in front (the API wants ``user`` first). Pass ``instructions=`` to
    replace the server's summarization prompt. A failure makes the compactor run the local
    summary with ``fallback_reason`` set.

    Args:
        client: ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``.
        model: The model, e.g. ``"claude-sonnet-4-5"``.
        **params: More ``create()`` arguments (``max_tokens``, ``timeout``, ``betas``,
            ``extra_headers``, …); ``instructions=`` goes into ``compaction``.

    Raises:
        TypeError: ``params`` sets ``model``, ``messages``, ``compaction``, ``tools`` or
            ``stream``, or the client has no ``beta.messages.create``.

    Example:
        >>> import anthropic
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import anthropic_compaction
        >>> summarize = anthropic_compaction(anthropic.Anthropic(), "claude-sonnet-4-5")
        >>> result = ContextCompactor(summarizer=summarize).compact(messages, system=system)
    """
    fn = "anthropic_compaction"
    params = dict(params)
    _check_params(fn, params, _ANTHROPIC_RESERVED)
    create = _client_attr(fn, client, "beta.messages.create")
    config: dict[str, Any] = {"type": "summarize"}
    instructions = params.pop("instructions", None)
    if instructions:
        config["instructions"] = instructions
    betas = list(params.pop("betas", ()))
    if ANTHROPIC_COMPACTION_BETA not in betas:
        betas.append(ANTHROPIC_COMPACTION_BETA)

    def build(request: SummaryRequest) -> dict[str, Any]:
        span = list(request.span)
        if not span or not all(isinstance(m, Mapping) and m.get("role") in ("user", "assistant") for m in span):
            raise ProviderCompactionError(f"{fn}: the span is not Anthropic messages")
        if span[0].get("role") != "user":
            span.insert(0, {"role": "user", "content": "(The conversation so far.)"})
        kw: dict[str, Any] = {
            "model": model,
            "messages": span,
            "max_tokens": request.max_tokens,
            "compaction": config,
            "betas": betas,
        }
        kw.update(params)
        return kw

    return _make(fn, model, client, params, create, build, _anthropic_items)  # type: ignore[no-any-return]
