"""`Session`: a conversation persisted in a store (SQLite, PostgreSQL) that compacts itself when it has to.

The piece agent builders put in their loop (seed 002's session integration, seed 003's database
design): append what the agent produces, call :meth:`Session.prepare` before each model call, send
:meth:`Session.context`. Every original message stays in the store; compactions only change what
is sent. The store's operations and the delta rule are described in :mod:`context_compactor._store`
(SQL in :mod:`context_compactor._sqlite`), background compaction in
:mod:`context_compactor._background` and :mod:`context_compactor._session_background`.

A Session is composed of three parts it holds: its context kept in step with the store
(:class:`~context_compactor._session_core.SessionCore`), the background policy
(:class:`~context_compactor._session_background.BackgroundPolicy`) and the async methods' driver
(:class:`~context_compactor._session_async.AsyncParts`); this module is the public API over them,
and what runs under the Session's compacting lock (``prepare``, ``pop``, ``clear``) is in
:mod:`context_compactor._session_prepare`.

Example:
    >>> from context_compactor import ContextCompactor
    >>> from context_compactor.session import Session
    >>> session = Session(compactor=ContextCompactor(max_context_tokens=200_000), store=":memory:")
    >>> row = session.append({"role": "user", "content": "Fix the failing test."})
    >>> session.prepare() is None          # far below the window: nothing to do
    True
    >>> session.context()
    [{'role': 'user', 'content': 'Fix the failing test.'}]

At or over the hard threshold :meth:`Session.prepare` always returns its result, and when the
context still does not fit the window the result says ``over_budget=True``: never send it then.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any, overload

from context_compactor import _core
from context_compactor._background import Job
from context_compactor._session_args import session_arguments
from context_compactor._session_async import AsyncParts
from context_compactor._session_background import BackgroundPolicy
from context_compactor._session_core import (
    FORMATS,
    CompactionRecord,
    SessionCore,
)
from context_compactor._session_prepare import clear, pop, prepare
from context_compactor._store import SessionStore
from context_compactor.compactor import CompactionCheck, ContextCompactor
from context_compactor.errors import MessageTypeError
from context_compactor.results import CompactResult

__all__ = ["FORMATS", "CompactionRecord", "Session", "SessionStore"]


class Session:
    """A conversation kept in a SQLite store, compacted when it has to be.

    Opens the session ``session_id`` in ``store`` if it exists, else creates it. Append what the
    agent produces; before each model call run :meth:`prepare` (which checks the context against
    the compactor's thresholds and compacts when needed, persisting the outcome), then send
    :meth:`context` (and :attr:`system`, :attr:`tools`). Originals are never lost:
    :meth:`history` returns them all and :meth:`expand` returns those a compaction replaced.

    Messages may be dicts or the ``openai``/``anthropic`` SDKs' pydantic objects (also inside
    dicts, e.g. ``{"role": "assistant", "content": response.content}``). They are converted with
    ``model_dump(mode="json", exclude_none=True)`` and stored as JSON, so :meth:`context`,
    :meth:`history` and :meth:`expand` always return plain dicts, the same before and after a
    reopen. Do not modify the dicts they return.

    ``result.record`` of a Session's compaction names **row ids** (DESIGN, Invariant 6): the ids
    :meth:`append` returned; summaries and edited copies get row ids too.

    Thread-safe: threads and asyncio tasks sharing a Session are serialised (appends wait for
    each other; a second ``prepare()`` waits for a running one, and appends are not blocked
    while the summarizer runs). Several processes may share one file; each sees the others'
    appends and compactions. A lock held longer than ``timeout`` raises :class:`StoreError`.

    Args:
        session_id: The session to open or create; a new random id when ``None``. The only
            positional argument (``Session(compactor, store, session_id)``, the old order, still
            works with a ``DeprecationWarning``).
        compactor: The :class:`ContextCompactor` (its config and summarizer are used).
        store: A SQLite path, ``":memory:"``, a ``postgresql://`` URL, or a :class:`SessionStore`
            to share a connection.
        system: The system prompt (Anthropic's and Gemini's separate one; OpenAI keeps it in the
            messages). ``None`` keeps the stored one; a value replaces it in the store.
        tools: Tool definitions (``None`` keeps the stored ones).
        format: ``"openai"``, ``"anthropic"``, ``"responses"`` or ``"gemini"``; detected from the
            messages when ``None``.
        timeout: Seconds to wait for a lock when ``store`` is a path (a :class:`SessionStore`
            has its own).

    Raises:
        MessageTypeError: An argument of the wrong type (``.field`` names it: ``"compactor"``,
            ``"store"``, ``"session_id"``, ``"system"``, ``"tools"``, ``"tools[2]"``, ...).
        ConfigError: ``format`` is not one of the formats.
        StoreError: The store cannot be opened or stays locked.

    Example:
        >>> session = Session("ticket-42", compactor=compactor, store="agent.db", system="You are a coding agent.")
        >>> session.append({"role": "user", "content": "Fix the failing test."})    # its row id
        1
        >>> result = session.prepare()        # None, or the CompactResult (record by row id)
        >>> messages = session.context()      # what to send now
    """

    @overload
    def __init__(
        self,
        session_id: str | None = None,
        *,
        compactor: ContextCompactor,
        store: str | os.PathLike[str] | SessionStore,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        timeout: float = 10.0,
    ) -> None: ...

    @overload
    def __init__(  # deprecated: Session(compactor, store, session_id)
        self,
        compactor: ContextCompactor,
        store: str | os.PathLike[str] | SessionStore,
        session_id: str | None = None,
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        timeout: float = 10.0,
    ) -> None: ...

    def __init__(
        self,
        *args: Any,
        compactor: ContextCompactor | None = None,
        store: str | os.PathLike[str] | SessionStore | None = None,
        session_id: str | None = None,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        session_id, compactor, store = session_arguments(args, session_id, compactor, store)
        self._parts(compactor, session_id, format)
        if isinstance(store, SessionStore):
            self._core.store, self._core.own_store = store, False
        elif isinstance(store, (str, os.PathLike)):
            opens: Any = SessionStore  # the backend the path or URL names
            self._core.store, self._core.own_store = opens(store, timeout=timeout), True
        else:
            raise MessageTypeError(
                f"store: expected a path, ':memory:' or a SessionStore, got {type(store).__name__}", None, "store"
            )
        try:
            self._core.open(system, tools, format)
        except BaseException:
            if self._core.own_store:
                self._core.store.close()
            raise

    def _parts(self, compactor: Any, session_id: str | None, format: str | None) -> None:
        """The parts a Session holds (no store yet): its context, the background policy and the
        async methods."""
        self._core = SessionCore(compactor, session_id, format)
        self._background = BackgroundPolicy(self._core)
        self._async = AsyncParts(self, self._core, self._background)

    @property
    def last_check(self) -> CompactionCheck | None:
        """The check the last :meth:`prepare` made (where the context stood)."""
        return self._core.last_check

    # -- opening and syncing ----------------------------------------------------------------------------

    # -- properties ----------------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self._core.id

    @property
    def compactor(self) -> ContextCompactor:
        """The compactor in use."""
        return self._core.compactor

    @property
    def store(self) -> SessionStore:
        """The store."""
        return self._core.store

    @property
    def state(self) -> _core.ConversationState:
        """The :class:`ConversationState` (cached counts, calibration, cool-down) of this Session."""
        return self._core.state

    @property
    def system(self) -> Any:
        """The system prompt to send now: the stored one, or, after a compaction with
        ``summary_role="system"`` on Anthropic, the one that compaction returned."""
        return self._core.system

    @property
    def tools(self) -> list[Any] | None:
        """The tool definitions to send."""
        return self._core.tools

    @property
    def format(self) -> str:
        """The format in use: the one given, else the one detected from the messages."""
        with self._core.store.locked():
            self._core.refresh()
            return self._core.fmt

    def __len__(self) -> int:
        """Number of original messages (the history)."""
        with self._core.store.locked():
            self._core.refresh()
            return self._core.last_seq

    # -- appending -------------------------------------------------------------------------------------------

    def append(self, message: Any) -> int:
        """Store one message (one transaction) and add it to the context.

        Args:
            message: A dict or an SDK message object (stored as JSON, returned as a dict).

        Returns:
            Its row id.

        Raises:
            MessageTypeError: Not a message (no mapping, no ``role`` str, content of a wrong type)
                or not storable as JSON (a value JSON cannot hold, a cycle, nesting too deep);
                ``.index`` and ``.field`` say where. Nothing is stored.
            InvalidConversationError: A message no later one can make valid: a role the format
                does not have (``invalid_role``) or a block without a field the provider requires
                (``malformed_block``); ``.problems`` lists them. Nothing is stored.
            StoreError: The store could not be written.

        Example:
            >>> len(session.context())
            40
            >>> session.append({"role": "user", "content": "hi"})    # the row id
            41
        """
        return self.extend([message])[0]

    def extend(self, messages: Iterable[Any]) -> list[int]:
        """Store several messages in one transaction (all or none) and add them to the context.

        Returns:
            Their row ids, in order.

        Raises:
            MessageTypeError: ``messages`` is a str, a dict or not iterable (``.field`` is
                ``"messages"``), or one message is not one (see :meth:`append`).
            InvalidConversationError: See :meth:`append`.

        Example:
            >>> session.extend([assistant_message, *tool_results])   # a call and its result
            [41, 42]
        """
        encoded = self._core.checked(messages)
        if not encoded:
            return []
        with self._core.store.locked():
            done = self._core.store.append_rows(self._core.id, [(plain.get("role"), text) for plain, text in encoded])
            if not self._core.appended(done, [p for p, _ in encoded]):
                self._core.refresh()
        return list(done.ids)

    # -- reading ----------------------------------------------------------------------------------------------

    def context(self) -> list[dict[str, Any]]:
        """What to send now: the latest compaction's output, then the messages appended after it.

        The Session remembers what it returned: :meth:`record_usage` matches the provider's usage
        report with it.

        Example:
            >>> response = client.chat.completions.create(model="gpt-4o", messages=session.context())
        """
        with self._core.store.locked():
            self._core.refresh()
            snapshot = list(self._core.msgs)
            self._core.sent = (snapshot, self._core.head)
            return list(snapshot)

    def context_ids(self) -> list[int]:
        """The row ids of :meth:`context`, in order."""
        with self._core.store.locked():
            self._core.refresh()
            return list(self._core.rows)

    def history(self) -> list[dict[str, Any]]:
        """Every original message, in the order appended (never compacted)."""
        return [json.loads(text) for _, text in self._core.store.history(self._core.id)]

    def history_ids(self) -> list[int]:
        """The row ids of :meth:`history`, in order."""
        return [rid for rid, _ in self._core.store.history(self._core.id)]

    def message(self, row_id: int) -> dict[str, Any]:
        """The message stored under ``row_id`` (an original, a summary or an edited copy).

        Raises:
            KeyError: No such row in this session.
        """
        text = self._core.store.message(self._core.id, row_id)
        if text is None:
            raise KeyError(row_id)
        return json.loads(text)  # type: ignore[no-any-return]

    def compactions(self) -> list[CompactionRecord]:
        """Every compaction of this session, oldest first.

        Example:
            >>> session.prepare(force=True).strategy        # the /compact command
            'summary'
            >>> for c in session.compactions():
            ...     print(c.id, c.strategy, c.tokens_before, c.tokens_after, len(c.replaced))
            1 summary 4440 ... ...
        """
        return self._core.records(self._core.store.compactions(self._core.id))

    def expand(self, record_id: int) -> list[dict[str, Any]]:
        """The original messages a compaction replaced or edited, exactly as appended, in order.

        Rows it names that are themselves products of earlier compactions are resolved: an
        earlier summary stands for the originals that compaction removed, an edited copy for
        its original.

        Raises:
            KeyError: No such compaction in this session.

        Example:
            >>> result = session.prepare(force=True)
            >>> record = session.compactions()[-1]
            >>> originals = session.expand(record.id)           # the messages it replaced, as appended
            >>> len(originals) == len(record.replaced), originals[0] == session.history()[record.replaced[0] - 1]
            (True, True)
        """
        return [json.loads(text) for text in self._core.store.expand(self._core.id, record_id)]

    # -- checking and compacting --------------------------------------------------------------------------------

    def check(self) -> CompactionCheck:
        """Where the current context stands against the window (the same values as
        ``compactor.check(session.context(), system=..., tools=..., state=session.state)``), from
        counts kept up to date on each append: its cost does not grow with the conversation."""
        with self._core.store.locked():
            self._core.refresh()
            return self._core.make_check()

    def prepare(self, *, force: bool = False, instructions: str | None = None) -> CompactResult | None:
        """Check the context and compact it when needed (the summarizer called synchronously).

        Compacts when the context reaches the soft threshold (or with ``force=True``, the
        ``/compact`` command), and tries micro-compaction above ``micro_trigger_ratio`` each time
        the context grew by ``clear_at_least_tokens``. The outcome is saved in one transaction.
        The check costs O(1): counts are kept up to date on each append.

        With ``background=True`` the summary never runs here: from the soft threshold a job
        summarises a snapshot in a thread and a later call applies it with the messages appended
        meanwhile kept verbatim; at the hard threshold old tool output is cleared, the output of
        a call that jumped past it from under the soft threshold is cut, or the rule summary
        applies now (:mod:`context_compactor._background`). ``force=True`` cancels a
        running job and compacts now, waiting for the summary.

        Args:
            force: Compact even below the thresholds.
            instructions: Extra instructions for the summary.

        Returns:
            The :class:`CompactResult` whenever the context changed (a compaction or repairs) or
            is still at or over the hard threshold (or the budget), even when nothing could be done: then
            ``strategy == "none"`` and ``reason`` says why. When the context does not fit the
            window (over the budget, ``max_context_tokens - reserve``) the result has
            ``over_budget=True`` and ``over_budget_reason``: do not send it as it is. Its
            ``record`` names row ids; its ``messages`` is the compacted context without messages
            appended meanwhile. ``None`` only when nothing was done and the context is under the
            hard threshold and the budget (:attr:`last_check` tells where it stands).

        Raises:
            StoreError: The store could not be written, or another ``prepare()`` of this Session
                ran too long.
            SummarizerError: As :meth:`ContextCompactor.compact`.

        Example:
            >>> result = session.prepare()
            >>> if result is not None and result.over_budget:
            ...     raise RuntimeError(result.over_budget_reason)      # it would not fit the window
            >>> if result is not None:
            ...     print(result.strategy, result.tokens_before, "->", result.tokens_after)
        """
        return prepare(self._core, self._background, force, instructions)

    @property
    def pending(self) -> Job | None:
        """The background job running or waiting to be applied (``background=True``), else ``None``."""
        return self._background.job

    # -- usage ---------------------------------------------------------------------------------------------------

    def record_usage(self, usage: Any, model: str | None = None) -> bool:
        """Learn from the provider's usage report of the last call (calibrates the token counts).

        The report is matched with the context :meth:`context` returned last (what was sent) and
        fed to :meth:`ConversationState.observe_usage`. Reports measured on a context that a
        compaction has replaced since are stale and ignored. Every report is saved with ``model``;
        reopening the session re-learns the calibration from the latest ones.

        Args:
            usage: ``response.usage`` (OpenAI or Anthropic SDK object or dict) or the prompt size
                as an int.
            model: The model that answered (saved with the report).

        Returns:
            Whether the report was learned from.

        Example:
            >>> response = client.chat.completions.create(model="gpt-4o", messages=session.context())
            >>> session.record_usage(response.usage, model="gpt-4o")
            True
        """
        with self._core.store.locked():
            self._core.refresh()
            sent = self._core.sent if self._core.sent is not None else (list(self._core.msgs), self._core.head)
        report = self._core.usage_report(usage, model, sent)
        self._core.store.add_usage(self._core.id, **report)
        return bool(report["learned"])

    # -- closing -----------------------------------------------------------------------------------------------------

    def pop(self) -> dict[str, Any] | None:
        """Remove the newest message, if no compaction has taken it, and return it.

        For agents that take a turn back (the OpenAI Agents SDK's ``pop_item``). Waits for a
        running :meth:`prepare` of this Session first; another process's compaction computed on
        a snapshot that held the message is refused by the store's head check only if it lands
        later, so pop only what your own process appended.

        Returns:
            The message (as :meth:`context` returns it), or ``None`` when the session is empty.

        Raises:
            StoreError: The newest message was compacted (summarised or edited): it is no
                longer in the context as it was appended.
        """
        return pop(self._core)

    def clear(self) -> None:
        """Delete every message and compaction of this session and start it again, empty, with the
        same system prompt, tools and format."""
        clear(self._core)

    def close(self) -> None:
        """Cancel a background job (its result is dropped; nothing is written after this) and
        close the store if this Session opened it (a :class:`SessionStore` you passed stays open)."""
        self._core.closed = True
        job, self._background.job = self._background.job, None
        if job is not None:
            job.cancel()
            job.join(1.0)
        if self._core.own_store:
            self._core.store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        core = self._core
        return (
            f"Session({core.id!r}, store={getattr(core.store, 'path', core.store)!r}, messages={core.last_seq}, "
            f"context={len(core.msgs)}, compactions={'none' if core.head is None else 'head ' + str(core.head)})"
        )

    # -- async code (:class:`~context_compactor._session_async.AsyncParts` does the work) ---------------------

    @classmethod
    async def aopen(
        cls,
        *positional: Any,
        compactor: ContextCompactor | None = None,
        store: str | os.PathLike[str] | SessionStore | None = None,
        session_id: str | None = None,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        timeout: float = 10.0,
    ) -> Session:
        """The constructor for async code (the constructor's arguments: ``session_id`` first,
        ``compactor=`` and ``store=`` by keyword), never blocking the event loop: with a
        ``postgresql://`` URL (or a PostgreSQL :class:`SessionStore`) the store is opened and the
        session read through the store's async connection; with SQLite, in a worker thread. A
        Session opened with the plain constructor works in async code too: its async methods open
        the async connection on first use.

        Example:
            >>> import asyncio
            >>> async def main(store):              # "postgresql://app@db/agents", or a SQLite file
            ...     async with await Session.aopen("ticket-42", compactor=compactor, store=store) as session:
            ...         await session.aappend({"role": "user", "content": "Fix the failing test."})
            ...         return await session.acontext()
            >>> asyncio.run(main("agent-async.db"))
            [{'role': 'user', 'content': 'Fix the failing test.'}]
        """
        session_id, compactor, store = session_arguments(positional, session_id, compactor, store, name="Session.aopen")
        self = cls.__new__(cls)
        self._parts(compactor, session_id, format)
        await self._async.open(store, system=system, tools=tools, format=format, timeout=timeout)
        return self

    async def aappend(self, message: Any) -> int:
        """:meth:`append` without blocking the event loop. Returns the row id."""
        return (await self._async.aextend([message]))[0]

    async def aextend(self, messages: Iterable[Any]) -> list[int]:
        """:meth:`extend` (one transaction) without blocking the event loop."""
        return await self._async.aextend(messages)

    async def acontext(self) -> list[dict[str, Any]]:
        """:meth:`context`, read without blocking the event loop (PostgreSQL reads the server each time)."""
        return await self._async.acontext()

    async def ahistory(self) -> list[dict[str, Any]]:
        """:meth:`history`, read without blocking the event loop."""
        return await self._async.ahistory()

    async def acheck(self) -> CompactionCheck:
        """:meth:`check`, without blocking the event loop."""
        return await self._async.acheck()

    async def acompactions(self) -> list[CompactionRecord]:
        """:meth:`compactions`, read without blocking the event loop."""
        return await self._async.acompactions()

    async def aexpand(self, record_id: int) -> list[dict[str, Any]]:
        """:meth:`expand`, read without blocking the event loop."""
        return await self._async.aexpand(record_id)

    async def arecord_usage(self, usage: Any, model: str | None = None) -> bool:
        """:meth:`record_usage`, without blocking the event loop."""
        return await self._async.arecord_usage(usage, model)

    async def aprepare(self, *, force: bool = False, instructions: str | None = None) -> CompactResult | None:
        """:meth:`prepare` for async code: an async (or sync, run in a worker thread) summarizer
        and hooks, through :meth:`ContextCompactor.acompact`. Its store calls never block the
        event loop: awaited on PostgreSQL's async connection, in a worker thread on SQLite (and
        for ``background=True``).

        Example:
            >>> import asyncio
            >>> result = asyncio.run(session.aprepare())    # None: under the thresholds
            >>> print(result)
            None
        """
        return await self._async.aprepare(force=force, instructions=instructions)

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop: cancels a background job, closes the
        store's async connection of this loop and the store, if this Session opened it."""
        await self._async.aclose()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
