"""pydantic-ai: ``ModelMessage`` lists, and a history processor for ``ProcessHistory``.

``pip install "context-compactor[pydantic-ai]"``. Every function of the package takes a list
of ``ModelRequest``/``ModelResponse`` as it is (``check``, ``compact``, ``plan``,
``validate_messages``, ``TokenCounter``): the Rust reader reads the parts by attribute, one view
message per ``ModelMessage`` (format ``anthropic``: tool returns are parts of the request after
the call). The result's kept messages are the same objects; new and edited ones are pydantic-ai
dataclasses (the summary is a ``ModelRequest`` with one ``UserPromptPart``; an edited message is
``dataclasses.replace`` of the original with its new parts, so its timestamp, usage and run id
stay).

Design note: reading stays in Rust (`src/python/extract/pydantic_ai.rs`); only the output is
built here, because pydantic-ai's messages and parts are dataclasses (a dict copy, which the
writer makes for SDK objects, cannot stand for them). The Rust side describes each new or
edited message (which parts of which input message, which texts replaced) and
:func:`from_core_output` builds it: Python work only for the few messages a compaction changes.

Requests that hold a ``SystemPromptPart`` or a ``CompactionPart`` (a provider's own compaction,
never split, edited or re-summarised) are pinned by the processor: kept as they are, with their
tool block (the task's request, which usually holds the system prompt, is then never shortened).

Example:
    >>> from pydantic_ai import Agent
    >>> from pydantic_ai.capabilities import ProcessHistory
    >>> compactor = ContextCompactor(max_context_tokens=128_000, summarizer=my_llm)
    >>> agent = Agent("openai:gpt-4.1", capabilities=[ProcessHistory(compactor.pydantic_ai_processor())])
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)

from context_compactor._core import SUMMARY_MARKER
from context_compactor.errors import ConfigError
from context_compactor.recall import DESCRIPTION, TOOL_NAME, Recall

if TYPE_CHECKING:
    from context_compactor.compactor import ContextCompactor

__all__ = ["history_processor", "pinned_indexes"]

#: Parts that pin their message (see the module's docstring).
_PINNING = frozenset({"system-prompt", "compaction"})
#: Edited parts whose text field is ``content`` (the rest: ``args`` of a call).
_CONTENT_PARTS = frozenset({"tool-return", "retry-prompt", "retry-feedback", "user-prompt", "text", "thinking"})


def _tool_name(originals: Sequence[Any], call_id: str | None) -> str:
    for m in originals:
        for p in getattr(m, "parts", ()):
            if getattr(p, "part_kind", None) == "tool-call" and p.tool_call_id == call_id:
                return str(p.tool_name)
    return "unknown_tool"


def _part(block: tuple[Any, ...], originals: Sequence[Any], request: bool) -> Any:
    tag = block[0]
    if tag == "text":
        return UserPromptPart(block[1]) if request else TextPart(block[1])
    if tag == "result":
        _, call_id, name, text, is_error = block
        return ToolReturnPart(
            tool_name=name or _tool_name(originals, call_id),
            content=text,
            tool_call_id=call_id,
            outcome="failed" if is_error else "success",
        )
    _, msg, k, edit, _kind = block
    part = originals[msg].parts[k]
    if edit is None:
        return part
    pk = getattr(part, "part_kind", None)
    if pk == "tool-call":
        return dataclasses.replace(part, args=edit)
    if pk in _CONTENT_PARTS:
        return dataclasses.replace(part, content=edit)
    # An image or another part replaced by text.
    return UserPromptPart(edit) if request else TextPart(edit)


def _build(desc: tuple[Any, ...], originals: Sequence[Any]) -> ModelMessage:
    tag, who, blocks = desc
    if tag == "rebuild":
        orig: ModelMessage = originals[who]
        if isinstance(orig, ModelRequest):
            return dataclasses.replace(orig, parts=[_part(b, originals, True) for b in blocks])
        return dataclasses.replace(orig, parts=[_part(b, originals, False) for b in blocks])
    request = who != "assistant"
    parts = [_part(b, originals, request) for b in blocks]
    return ModelRequest(parts=parts) if request else ModelResponse(parts=parts)


def from_core_output(out: list[Any], originals: list[Any]) -> list[ModelMessage]:
    """The output of a compaction of pydantic-ai messages, as pydantic-ai messages (the shell's
    ``plan.result_of`` calls it when the core tags its output ``pydantic_ai``: kept messages are
    the input objects, the others are descriptions)."""
    return [_build(m, originals) if isinstance(m, tuple) else m for m in out]


def pinned_indexes(messages: Sequence[ModelMessage]) -> list[int]:
    """Indexes of the messages that hold a system prompt or a provider compaction (the task's
    request too when it holds the system prompt: it is then kept whole, never shortened, and a
    history whose system prompt and task alone do not fit is flagged ``over_budget``)."""
    return [i for i, m in enumerate(messages) if any(getattr(p, "part_kind", None) in _PINNING for p in m.parts)]


def _unmerged(messages: list[ModelMessage]) -> list[ModelMessage]:
    """pydantic-ai merges consecutive requests, so an earlier summary ends up inside the request
    before it (the pinned first request, often): split such requests again, so that the
    summary is a message of its own that the next compaction replaces instead of keeping it (and
    every later one) inside the pinned request. Other messages stay the same objects."""
    out: list[ModelMessage] = []
    for m in messages:
        if not isinstance(m, ModelRequest) or len(m.parts) < 2 or not any(_is_summary(p) for p in m.parts):
            out.append(m)
            continue
        run: list[Any] = []
        for p in m.parts:
            if _is_summary(p):
                if run:
                    out.append(dataclasses.replace(m, parts=run))
                    run = []
                out.append(dataclasses.replace(m, parts=[p]))
            else:
                run.append(p)
        if run:
            out.append(dataclasses.replace(m, parts=run))
    return out


def _is_summary(part: Any) -> bool:
    content = getattr(part, "content", None)
    return (
        getattr(part, "part_kind", None) == "user-prompt"
        and isinstance(content, str)
        and content.startswith(SUMMARY_MARKER)
    )


class _States:
    """A ``ConversationState`` per agent run (by ``RunContext.run_id``), the latest 64."""

    def __init__(self) -> None:
        self._by_run: OrderedDict[str, Any] = OrderedDict()

    def get(self, key: str | None) -> Any:
        from context_compactor._core import ConversationState

        if key is None:
            return None
        state = self._by_run.get(key)
        if state is None:
            state = self._by_run[key] = ConversationState()
            while len(self._by_run) > 64:
                self._by_run.popitem(last=False)
        self._by_run.move_to_end(key)
        return state


def history_processor(
    compactor: ContextCompactor, *, asynchronous: bool = False, with_context: bool = False
) -> Callable[..., Any]:
    """A pydantic-ai history processor that compacts when :meth:`ContextCompactor.check` says so.

    Use it as ``Agent(..., capabilities=[ProcessHistory(history_processor(compactor))])`` (or
    ``compactor.pydantic_ai_processor()``). It never orphans a tool return: the compactor cuts
    only between tool blocks, and the repair pass fixes input that already had one.

    Args:
        compactor: The compactor (its window and summarizer; ``summary_role`` must be
            ``"user"``: a pydantic-ai history has no separate system prompt to put it in).
        asynchronous: An ``async def`` processor that awaits ``acompact`` (an async summarizer).
        with_context: Take pydantic-ai's ``RunContext`` first; the processor then keeps a
            ``ConversationState`` per run (``ctx.run_id``), so each step counts only the new
            messages.
    """
    if compactor.config.summary_role != "user":
        raise ConfigError(
            'summary_role must be "user" for pydantic-ai: a message history has no separate system prompt',
            "summary_role",
        )
    states = _States()

    def due(messages: list[ModelMessage], state: Any) -> bool:
        return bool(messages) and compactor.check(messages, state=state).should_compact

    if asynchronous and with_context:

        async def aprocess_ctx(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
            state = states.get(ctx.run_id)
            if not due(messages, state):
                return messages
            messages = _unmerged(messages)
            result = await compactor.acompact(messages, pinned=pinned_indexes(messages), state=state)
            return list(result.messages)

        return aprocess_ctx
    if asynchronous:

        async def aprocess(messages: list[ModelMessage]) -> list[ModelMessage]:
            if not due(messages, None):
                return messages
            messages = _unmerged(messages)
            return list((await compactor.acompact(messages, pinned=pinned_indexes(messages))).messages)

        return aprocess
    if with_context:

        def process_ctx(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
            state = states.get(ctx.run_id)
            if not due(messages, state):
                return messages
            messages = _unmerged(messages)
            return list(compactor.compact(messages, pinned=pinned_indexes(messages), state=state).messages)

        return process_ctx

    def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        if not due(messages, None):
            return messages
        messages = _unmerged(messages)
        return list(compactor.compact(messages, pinned=pinned_indexes(messages)).messages)

    return process


def recall_tool(recall: Recall, *, name: str = TOOL_NAME) -> Any:
    """The ``recall`` tool (:mod:`context_compactor.recall`) as a pydantic-ai ``Tool``:
    ``Agent(model, tools=[recall_tool(Recall(session))])``."""
    from pydantic_ai import Tool

    def run(id: str, start: int = 0, count: int | None = None, pattern: str | None = None) -> str:
        return recall(id, start=start, count=count, pattern=pattern)

    return Tool(run, name=name, description=DESCRIPTION, takes_ctx=False)
