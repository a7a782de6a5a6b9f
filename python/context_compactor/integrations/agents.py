"""The OpenAI Agents SDK: a compacting session, and a model-input filter for your own session.

``pip install "context-compactor[agents]"``. Two ways in, which combine:

- :class:`CompactingSession` is an Agents SDK session (the ``Session`` protocol and
  ``run_compaction``, the SDK's compaction-aware hook) backed by a
  :class:`context_compactor.Session` that stores Responses items in SQLite (or any
  :class:`~context_compactor.SessionStore`). ``Runner.run(agent, input, session=session)`` reads
  the compacted context at the start of each run and the SDK calls :meth:`run_compaction` after
  each turn. Originals are never lost: ``session.inner.history()`` / ``expand()``.
- :func:`input_filter` is a ``RunConfig.call_model_input_filter`` that compacts the model input
  *inside* a run, before every model call: what a long tool-calling run needs, because the SDK
  reads a session only when a run starts.

Design note — why the filter keeps a session of its own. The SDK hands the filter the run's
whole input before each model call (the original input plus every item generated so far, as new
dicts each time). Compacting that list from scratch at each call would summarise the same span
again and again and change the prefix every call (no prompt caching). So the filter remembers
what it saw: when the new input extends the previous one (an equal prefix), only the new items are
appended to an in-memory :class:`~context_compactor.Session`, which applies its earlier
compaction to them (the delta rule) and compacts again only at a threshold. An input that does
not extend the previous one (a new run) starts over. One filter serves one conversation at a
time: give each concurrent run its own (``input_filter(...)`` is cheap).

Neither path ever hands the model an orphan ``function_call_output`` or a ``reasoning`` item
without its following item (the core's legal cuts); ``get_items(limit)`` drops leading items
that would be orphaned by the limit.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit
from agents.run_config import CallModelData, ModelInputData

from context_compactor import _core
from context_compactor._session_args import compacting_session_arguments
from context_compactor.compactor import ContextCompactor
from context_compactor.errors import MessageTypeError
from context_compactor.recall import DESCRIPTION, TOOL_NAME, Recall
from context_compactor.session import Session

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session import OpenAIResponsesCompactionArgs

    from context_compactor._store import SessionStore
    from context_compactor.results import CompactResult

__all__ = ["CompactingInputFilter", "CompactingSession", "input_filter", "legal_suffix"]


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def legal_suffix(items: Sequence[Any], limit: int | None) -> list[Any]:
    """The last ``limit`` items (all when ``None``), starting at the first legal cut at or after
    ``len(items) - limit`` (the core's cut points: never inside a tool block, so no output
    without its call, and never right after a reasoning item), less a trailing run of reasoning
    items left without their following item. The provider refuses both; the result may
    therefore hold fewer than ``limit`` items.
    """
    items = list(items)
    if limit is None or limit >= len(items):
        return items
    if limit <= 0:
        return []
    want = len(items) - limit
    cuts = _core.analyze_conversation(items, format="responses").cut_points
    out = items[next((c for c in cuts if c >= want), len(items)) :]
    while out and _field(out[-1], "type") == "reasoning":
        out.pop()
    return out


class CompactingSession(SessionABC):
    """An Agents SDK session that keeps the conversation inside the context window.

    Args:
        session_id: The conversation's id in the store (the only positional argument, as in the
            Agents SDK's ``SQLiteSession``; ``CompactingSession(session_id, compactor, store)``,
            the old order, still works with a ``DeprecationWarning``).
        compactor: The :class:`~context_compactor.ContextCompactor` (window, summarizer, ...).
        store: A SQLite path, ``":memory:"`` (the default) or a :class:`~context_compactor.SessionStore`.
        instructions: The agent's instructions, counted like a system prompt (they are sent with
            every call). ``None`` counts none.
        tools: The tool definitions sent with every call (counted), as Responses tool dicts.
        session_settings: The SDK's :class:`SessionSettings` (``limit``: items per read).
        prepare_on_read: Run :meth:`context_compactor.Session.aprepare` in :meth:`get_items`, so
            every run starts from a context under the thresholds (default ``True``).

    Example:
        >>> import asyncio
        >>> from agents import Agent, Runner
        >>> agent = Agent(name="coder", instructions="You fix failing tests.")   # the model: OpenAI's
        >>> session = CompactingSession(
        ...     "user-42", compactor=ContextCompactor(max_context_tokens=200_000), store="agent.db"
        ... )
        >>> result = asyncio.run(Runner.run(agent, "修复失败的测试", session=session))
        >>> [item.get("role") for item in asyncio.run(session.get_items())]
        ['user', 'assistant']
    """

    def __init__(
        self,
        session_id: str,
        *legacy: Any,
        compactor: ContextCompactor | None = None,
        store: str | os.PathLike[str] | SessionStore = ":memory:",
        instructions: str | None = None,
        tools: Sequence[Any] | None = None,
        session_settings: SessionSettings | None = None,
        prepare_on_read: bool = True,
    ) -> None:
        compactor, store = compacting_session_arguments(legacy, compactor, store)
        if not isinstance(session_id, str):
            raise MessageTypeError(f"session_id: expected a str, got {type(session_id).__name__}", None, "session_id")
        self.session_id = session_id
        self.session_settings = session_settings
        self.prepare_on_read = prepare_on_read
        self._compactor = compactor
        self._store_arg = store
        self._instructions = instructions
        self._tools = None if tools is None else list(tools)
        self._inner = Session(
            session_id, compactor=compactor, store=store, system=instructions, tools=self._tools, format="responses"
        )
        self.last_result: CompactResult | None = None

    @property
    def inner(self) -> Session:
        """The :class:`context_compactor.Session` behind it (history, compactions, expand)."""
        return self._inner

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The compacted context (compacting first when due), the last ``limit`` items of it.

        ``limit`` (else ``session_settings.limit``) never cuts a call from its output: see
        :func:`legal_suffix`."""
        if self.prepare_on_read:
            await self._prepare(force=False)
        items = await asyncio.to_thread(self._inner.context)
        return legal_suffix(items, resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store items (dicts or the SDK's pydantic items) in one transaction."""
        if items:
            await asyncio.to_thread(self._inner.extend, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item, ``None`` when the session is empty.

        Raises:
            StoreError: The newest item was already compacted (replaced by a summary or an edit):
                it is no longer an item of the context that can be taken back.
        """
        item = await asyncio.to_thread(self._inner.pop)
        return cast("TResponseInputItem | None", item)  # a stored item: the dict the SDK gave us

    async def clear_session(self) -> None:
        """Delete every item and compaction of this session."""

        def clear() -> None:
            self._inner.clear()

        await asyncio.to_thread(clear)

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """The SDK's compaction hook (called after each turn): compact when due, or now with
        ``force``. ``response_id``, ``compaction_mode`` and ``store`` are accepted and ignored:
        the compaction runs here, on the stored items, whatever the provider stored."""
        await self._prepare(force=bool((args or {}).get("force", False)))

    async def _prepare(self, *, force: bool) -> None:
        result = await self._inner.aprepare(force=force)
        if result is not None:
            self.last_result = result

    def close(self) -> None:
        """Close the store when this session opened it."""
        self._inner.close()

    def __repr__(self) -> str:
        return f"CompactingSession({self.session_id!r}, store={self._store_arg!r})"


class CompactingInputFilter:
    """A ``RunConfig.call_model_input_filter`` that compacts the model input before every call.

    Build it with :func:`input_filter`. Sync and async runs both work (``Runner.run`` awaits it;
    the summarizer may be sync or async). ``last_result`` is the latest compaction's result.
    """

    def __init__(self, compactor: ContextCompactor, *, tools: Sequence[Any] | None = None) -> None:
        if not isinstance(compactor, ContextCompactor):
            raise MessageTypeError(
                f"compactor: expected a ContextCompactor, got {type(compactor).__name__}", None, "compactor"
            )
        self._compactor = compactor
        self._tools = None if tools is None else list(tools)
        self._lock = threading.Lock()
        self._session: Session | None = None
        self._seen: list[Any] = []
        self._instructions: str | None = None
        self.last_result: CompactResult | None = None
        self.compactions = 0

    def _sync(self, items: list[Any], instructions: str | None) -> Session:
        """Bring the inner session in step with ``items``: append what is new, or start over."""
        n = len(self._seen)
        extends = (
            self._session is not None
            and instructions == self._instructions
            and len(items) >= n
            and all(a is b or a == b for a, b in zip(items[:n], self._seen, strict=True))
        )
        if not extends:
            if self._session is not None:
                self._session.close()
            self._session = Session(
                compactor=self._compactor, store=":memory:", system=instructions, tools=self._tools, format="responses"
            )
            self._instructions = instructions
            self._seen, n = [], 0
        assert self._session is not None
        new = items[n:]
        if new:
            self._session.extend(new)
            self._seen.extend(new)
        return self._session

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        instructions = data.model_data.instructions
        with self._lock:
            session = self._sync(items, instructions)
        result = await session.aprepare()
        if result is not None and result.strategy != "none":
            self.last_result = result
            self.compactions += 1
        return ModelInputData(input=session.context(), instructions=instructions)  # type: ignore[arg-type]

    def close(self) -> None:
        """Release the in-memory session."""
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
                self._seen = []


def input_filter(
    compactor: ContextCompactor, *, tools: Sequence[Any] | None = None
) -> Callable[[CallModelData[Any]], Any]:
    """A ``call_model_input_filter`` that keeps each model call of a run inside the window.

    Example:
        >>> import asyncio
        >>> from agents import Agent, RunConfig, Runner
        >>> agent = Agent(name="coder", instructions="You fix failing tests.")   # the model: OpenAI's
        >>> config = RunConfig(call_model_input_filter=input_filter(compactor))
        >>> result = asyncio.run(Runner.run(agent, task, run_config=config, max_turns=200))
        >>> result.final_output
        'Done: the test passes.'
    """
    return CompactingInputFilter(compactor, tools=tools)


def recall_tool(recall: Recall, *, name: str = TOOL_NAME) -> Any:
    """The ``recall`` tool (:mod:`context_compactor.recall`) as an Agents SDK ``FunctionTool``:
    ``Agent(name=..., tools=[recall_tool(Recall(session))])``."""
    from agents import function_tool

    def run(id: str, start: int = 0, count: int | None = None, pattern: str | None = None) -> str:
        return recall(id, start=start, count=count, pattern=pattern)

    return function_tool(run, name_override=name, description_override=DESCRIPTION, strict_mode=False)
