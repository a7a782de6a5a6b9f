"""The store behind :class:`~context_compactor.session.Session`: one interface of named operations.

Over 600 lines on purpose: this is the page a store author reads (the design note, the data types a
store returns, the sync and async interfaces with their contracts, the walks every store shares);
the operations themselves are written once, in :mod:`context_compactor._ops`.

Design note — what a store holds, and the operations it offers.

A session is an append-only log of the messages the agent produced (the *originals*), plus a
chain of compactions, each of which says what the model should be sent from then on. Nothing is
ever updated in place except the session's two pointers (``last_seq``, ``head``), so a reader
sees either the state before a transaction or the state after it.

* **Originals** get a row id and a ``seq`` (1, 2, 3, ... per session) when appended.
* **A compaction** saves the context it produced (``context_items``: row ids in order), the rows
  it derived (a summary, an edited copy of a tool result: rows too, with ``kind`` ``summary``,
  ``edited`` or ``inserted``), the record (``summary_of``: each row it replaced or edited) and
  ``upto_seq``, the last original it saw; then it moves the session's ``head`` to itself.
* **The context to send** is the head compaction's ``context_items`` followed by every original
  with ``seq > upto_seq`` (every original before the first compaction).

That last rule is the **delta rule**: a compaction computed on a snapshot (the originals up to
``upto_seq``) is applied over the rows appended since without reading them: they stay verbatim
after the summary. This is what lets a summary run in the background (``background=True``) while
the agent keeps appending, and lets several processes append while one compacts.

A store implements the operations of :class:`SessionStore` below; all SQL lives in the
implementation (:mod:`context_compactor._sqlite` for SQLite; PostgreSQL plugs in under the
``postgresql://`` scheme). Its guarantees, which :class:`Session` relies on:

1. One transaction per :meth:`~SessionStore.append_rows` (all rows or none) and per
   :meth:`~SessionStore.save_compaction` (its row, derived rows, context, record and the new head
   together): after a crash (SIGKILL included) the store holds the old context or the new one.
2. :meth:`~SessionStore.save_compaction` is conditional: it applies only when the session's head
   is still the ``base_head`` the compaction was computed from, else returns ``None`` (another
   connection compacted first; the caller plans again). Appends never conflict.
3. Schema versioning: a store written by a newer version of the package is refused, an older one
   is migrated in one transaction when opened.
4. Thread-safe: every operation may be called from any thread; :meth:`~SessionStore.locked` is a
   re-entrant lock with a timeout that a Session holds around an operation and the in-memory
   state it updates from it, so the two stay in step.
5. Async (optional): :meth:`~SessionStore.aio` returns an :class:`AsyncSessionStore` for the
   running event loop, the same operations awaited, with the same guarantees (PostgreSQL's, on
   psycopg's ``AsyncConnection``); a store without one (SQLite) is driven from async code in
   worker threads.

:meth:`~SessionStore.compactions` and :meth:`~SessionStore.expand` are the same for every store:
:func:`stored_compactions` and the walk :func:`expand_walk` (resolving summaries and edited
copies back to the originals) are written once here, and a store only fetches the rows they ask for.

Messages cross this interface as ``(role, JSON text)``; encoding is :mod:`context_compactor._codec`'s.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import importlib
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from context_compactor.errors import StoreError

__all__ = [
    "REMOVED",
    "Appended",
    "AsyncSessionStore",
    "NewCompaction",
    "Saved",
    "SessionInfo",
    "SessionStore",
    "StoredCompaction",
    "StoredContext",
    "expand_walk",
    "finish",
    "register_backend",
    "stored_compactions",
    "walk",
]

T = TypeVar("T")

#: Record actions after which the message is no longer in the context (the others edit it).
REMOVED = frozenset({"summarized", "truncated", "dropped"})


def now() -> float:
    """The timestamps stores write: seconds since the epoch."""
    return time.time()


# -- what crosses the interface --------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredContext:
    """The session's context as stored, or what changed since a known point.

    Attributes:
        head: The head compaction id (``None``: no compaction yet).
        upto_seq: The head compaction saw the originals up to this seq (0 without one).
        system: The system prompt the head compaction set (JSON text), else ``None``.
        last_seq: The seq of the newest original.
        rows: ``(row id, JSON text)`` in context order: the whole context when :attr:`complete`,
            else only the originals appended after the caller's ``last_seq`` (same head).
        complete: Whether :attr:`rows` is the whole context.
        marker: :meth:`SessionStore.marker` as of this read (``None``: unknown).
    """

    head: int | None
    upto_seq: int
    system: str | None
    last_seq: int
    rows: tuple[tuple[int, str], ...]
    complete: bool = True
    marker: Hashable | None = None


@dataclass(frozen=True)
class SessionInfo:
    """A session's settings (JSON text) and its context, as :meth:`SessionStore.open_session` left them."""

    system: str | None
    tools: str | None
    format: str | None
    context: StoredContext


@dataclass(frozen=True)
class Appended:
    """What :meth:`SessionStore.append_rows` did.

    Attributes:
        ids: The new rows' ids, in order.
        first_seq: The seq of the first of them (the others follow).
        head: The session's head at the append (another connection may have moved it).
        marker: :meth:`SessionStore.marker` just after the append, taken inside its transaction.
    """

    ids: tuple[int, ...]
    first_seq: int
    head: int | None
    marker: Hashable | None = None


@dataclass(frozen=True)
class NewCompaction:
    """A compaction to save with :meth:`SessionStore.save_compaction`.

    Attributes:
        base_head: The head compaction it was computed from (the condition of the save).
        upto_seq: The last original of the snapshot it was computed on; later originals follow
            its context verbatim (the delta rule).
        strategy, summary, tokens_before, tokens_after: As in the result.
        system: The system prompt to send from now on (JSON text), when it changed.
        details: JSON-able details (over_budget, fallback_reason, must_keep, phases, ...).
        context: The context it produced, in order: ``(row id, None, None, None, None)`` for a row
            that exists, ``(None, kind, role, JSON text, source row)`` for a derived one (``kind``
            ``summary``, ``edited`` or ``inserted``; ``source``: the row an edited copy copies).
        record: ``(row id, action, detail)`` for each row it replaced or edited.
    """

    base_head: int | None
    upto_seq: int
    strategy: str
    summary: str | None
    tokens_before: int
    tokens_after: int
    system: str | None
    details: dict[str, Any]
    context: tuple[tuple[int | None, str | None, str | None, str | None, int | None], ...]
    record: tuple[tuple[int, str, str], ...]
    created_at: float = field(default_factory=now)


@dataclass(frozen=True)
class Saved:
    """What :meth:`SessionStore.save_compaction` saved: the compaction id, the context's row ids
    (derived rows got new ids) and the marker taken inside its transaction."""

    id: int
    rows: tuple[int, ...]
    marker: Hashable | None = None


@dataclass(frozen=True)
class StoredCompaction:
    """One saved compaction as :meth:`SessionStore.compactions` lists it."""

    id: int
    created_at: float
    strategy: str
    summary: str | None
    tokens_before: int
    tokens_after: int
    upto_seq: int
    details: dict[str, Any]
    record: tuple[tuple[int, str, str], ...]


# -- the interface ----------------------------------------------------------------------------------------

#: The store of SQLite paths and ``":memory:"``.
_SQLITE = "context_compactor._sqlite:SQLiteStore"
#: URL scheme -> ``"module:Class"`` of the store that handles it (anything else is a SQLite path).
_BACKENDS: dict[str, str] = {
    "postgresql": "context_compactor._postgres:PostgresStore",
    "postgres": "context_compactor._postgres:PostgresStore",
}


def register_backend(scheme: str, target: str) -> None:
    """Make ``SessionStore("<scheme>://...")`` open ``target`` (``"module:Class"``)."""
    _BACKENDS[scheme] = target


class SessionStore(abc.ABC):
    """A database holding any number of sessions, behind named operations.

    ``SessionStore(path_or_url, ...)`` opens the store the argument names: a SQLite file path
    or ``":memory:"`` (:class:`~context_compactor._sqlite.SQLiteStore`), or a
    ``postgresql://`` URL when the PostgreSQL store is installed. Pass a path to
    :class:`~context_compactor.session.Session` and it opens its own store; create a
    ``SessionStore`` yourself to share one connection between sessions.

    Writing your own store: subclass this, implement the abstract operations with the
    guarantees of the module's design note, and hand an instance to ``Session`` (or register its
    URL scheme with :func:`register_backend`: ``Session(compactor=compactor, store="<scheme>://...")`` then calls
    ``SessionStore(url, timeout=...)``, so the constructor takes the URL and a ``timeout``). Row
    ids are integers unique within the store; ``seq`` is per session.

    Example:
        >>> store = SessionStore(":memory:")
        >>> store.schema_version
        3
        >>> store.session_ids()
        []
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> SessionStore:
        if cls is SessionStore:
            target = args[0] if args else kwargs.get("path", ":memory:")
            cls = _backend(target)
        return super().__new__(cls)

    def __init__(self, *, timeout: float = 10.0) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise StoreError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._closed = False

    # -- locking --------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this store's lock (re-entrant), waiting at most ``timeout`` seconds."""
        if not self._lock.acquire(timeout=self.timeout):
            raise StoreError(f"the session store's lock was held by another thread for more than {self.timeout:g} s")
        try:
            if self._closed:
                raise StoreError("the session store is closed")
            yield
        finally:
            self._lock.release()

    @contextlib.asynccontextmanager
    async def alocked(self) -> AsyncIterator[None]:
        """:meth:`locked` from async code: the same lock, taken without blocking the event loop
        (another thread may hold it for a sync call: polled every millisecond, at most ``timeout``
        seconds). Never hold it across an ``await`` of a store operation."""
        deadline = time.monotonic() + self.timeout
        while not self._lock.acquire(blocking=False):
            if time.monotonic() > deadline:
                raise StoreError(
                    f"the session store's lock was held by another thread for more than {self.timeout:g} s"
                )
            await asyncio.sleep(0.001)
        try:
            if self._closed:
                raise StoreError("the session store is closed")
            yield
        finally:
            self._lock.release()

    def marker(self) -> Hashable | None:
        """A value that changes whenever anything was committed to the store, by any connection,
        so a Session can skip reading when nothing changed. ``None`` (the default): unknown, the
        Session asks :meth:`load_context` each time."""
        return None

    # -- operations -----------------------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def schema_version(self) -> int:
        """The schema version of the data."""

    @abc.abstractmethod
    def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        """Create the session, or open it and replace the settings given (not ``None``) that
        differ; one transaction. Returns the settings in force and the context."""

    @abc.abstractmethod
    def load_context(self, session_id: str, *, head: int | None = None, after_seq: int | None = None) -> StoredContext:
        """The context of the session (see :class:`StoredContext`), read consistently. With
        ``after_seq``: when the head is still ``head``, only the originals after ``after_seq``
        (``complete=False``). Raises :class:`StoreError` when the session was deleted."""

    @abc.abstractmethod
    def append_rows(self, session_id: str, rows: Sequence[tuple[str | None, str]]) -> Appended:
        """Append originals ``(role, JSON text)`` in one transaction, with the next seqs."""

    @abc.abstractmethod
    def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        """Save a compaction and make it the head in one transaction, if the head is still
        ``compaction.base_head``; ``None`` (nothing written) otherwise."""

    @abc.abstractmethod
    def compactions(self, session_id: str) -> list[StoredCompaction]:
        """Every compaction of the session, oldest first, with its record."""

    @abc.abstractmethod
    def expand(self, session_id: str, compaction_id: int) -> list[str]:
        """The originals (JSON text, in seq order) a compaction replaced or edited, resolving the
        derived rows it names (an earlier summary: the rows its compaction removed; an edited
        copy: its source). Raises ``KeyError`` when the session has no such compaction."""

    @abc.abstractmethod
    def history(self, session_id: str) -> list[tuple[int, str]]:
        """Every original ``(row id, JSON text)``, in seq order."""

    @abc.abstractmethod
    def message(self, session_id: str, row_id: int) -> str | None:
        """The JSON text of one row of the session (any kind), ``None`` when absent."""

    @abc.abstractmethod
    def add_usage(
        self,
        session_id: str,
        *,
        model: str | None,
        prompt_tokens: int | None,
        usage: str | None,
        head: int | None,
        context_len: int,
        learned: bool,
    ) -> None:
        """Save one usage report (one transaction)."""

    @abc.abstractmethod
    def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        """``(prompt_tokens, context_len)`` of the latest ``limit`` learned reports measured on
        the context of ``head``, oldest first."""

    @abc.abstractmethod
    def session_ids(self) -> list[str]:
        """The ids of every session in the store, oldest first."""

    @abc.abstractmethod
    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything it holds; whether it existed."""

    @abc.abstractmethod
    def pop_original(self, session_id: str) -> tuple[int, str] | None:
        """Delete the newest original and return ``(row id, JSON text)`` in one transaction, when
        it is not compacted (its seq is after the head compaction's ``upto_seq``); its seq is
        given to the next append. ``None`` when the session has no original. Raises
        :class:`StoreError` when the newest original was compacted (replaced or edited)."""

    def session_meta(self, session_id: str) -> str | None:
        """What the application keeps with the session (JSON text the store does not read; the
        server keeps a session's format, config and summarizer name there), ``None`` when
        nothing is kept. Deleted with the session. A store that keeps none raises
        ``NotImplementedError`` (the two built-in stores keep it)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no session meta")

    def set_session_meta(self, session_id: str, meta: str | None) -> None:
        """Replace what the application keeps with the session (see :meth:`session_meta`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no session meta")

    @abc.abstractmethod
    def _close(self) -> None:
        """Release the connection (called once, under the lock)."""

    # -- closing --------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async code -----------------------------------------------------------------------------------------

    @classmethod
    async def aopen(cls, target: Any = ":memory:", *, timeout: float = 10.0, **kwargs: Any) -> SessionStore:
        """Open the store ``target`` names from async code, never blocking the event loop: a
        PostgreSQL store connects through its async twin (:meth:`aio`) and opens its sync
        connection only if a sync method needs it; a SQLite store opens in a worker thread.

        Example:
            >>> store = await SessionStore.aopen("postgresql://app@db/agents")  # needs a server  # doctest: +SKIP
        """
        backend = _backend(target) if cls is SessionStore else cls
        return await backend._aopen(target, timeout=timeout, **kwargs)

    @classmethod
    async def _aopen(cls, target: Any, *, timeout: float = 10.0, **kwargs: Any) -> SessionStore:
        opened: list[SessionStore] = []

        def build() -> SessionStore:
            backend: Any = cls  # a subclass: its constructor takes the target
            opened.append(backend(target, timeout=timeout, **kwargs))
            return opened[0]

        try:
            return await finish(asyncio.ensure_future(asyncio.to_thread(build)))
        except asyncio.CancelledError:
            for store in opened:
                store.close()
            raise

    async def aio(self) -> AsyncSessionStore | None:
        """The store's native async twin for the running event loop, which a Session's async
        methods use; ``None`` (the default, SQLite's): they run the sync operations in a worker
        thread."""
        return None

    async def aclose(self) -> None:
        """:meth:`close` from async code (closing the async twins too)."""
        self.close()

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncSessionStore(abc.ABC):
    """The async operations a Session's async methods call when its store has a native async twin
    (:meth:`SessionStore.aio`): the same names, arguments, results and guarantees as
    :class:`SessionStore`'s, awaited. Each runs to its end once started: a cancelled caller sees
    :class:`asyncio.CancelledError` after the operation's transaction committed or rolled back
    (:func:`finish`)."""

    timeout: float

    @abc.abstractmethod
    async def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo: ...

    @abc.abstractmethod
    async def load_context(
        self, session_id: str, *, head: int | None = None, after_seq: int | None = None
    ) -> StoredContext: ...

    @abc.abstractmethod
    async def append_rows(self, session_id: str, rows: Sequence[tuple[str | None, str]]) -> Appended: ...

    @abc.abstractmethod
    async def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None: ...

    @abc.abstractmethod
    async def compactions(self, session_id: str) -> list[StoredCompaction]: ...

    @abc.abstractmethod
    async def expand(self, session_id: str, compaction_id: int) -> list[str]: ...

    @abc.abstractmethod
    async def history(self, session_id: str) -> list[tuple[int, str]]: ...

    @abc.abstractmethod
    async def message(self, session_id: str, row_id: int) -> str | None: ...

    @abc.abstractmethod
    async def add_usage(
        self,
        session_id: str,
        *,
        model: str | None,
        prompt_tokens: int | None,
        usage: str | None,
        head: int | None,
        context_len: int,
        learned: bool,
    ) -> None: ...

    @abc.abstractmethod
    async def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]: ...

    @abc.abstractmethod
    async def session_ids(self) -> list[str]: ...

    @abc.abstractmethod
    async def delete_session(self, session_id: str) -> bool: ...

    @abc.abstractmethod
    async def pop_original(self, session_id: str) -> tuple[int, str] | None: ...

    async def session_meta(self, session_id: str) -> str | None:
        raise NotImplementedError(f"{type(self).__name__} keeps no session meta")

    async def set_session_meta(self, session_id: str, meta: str | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no session meta")

    @abc.abstractmethod
    async def aclose(self) -> None: ...


async def finish(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` (a task or future) to its end even when the caller is cancelled: a
    cancellation waits for it to finish, then propagates (a store operation's transaction is
    never cut in the middle and the caller's state stays in step with what it did)."""
    fut = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue
            except BaseException:  # the call's own error: the cancellation wins
                break
        raise


def _backend(target: Any) -> type[SessionStore]:
    """The store class for a path or URL."""
    if isinstance(target, str) and "://" in target:
        scheme = target.split("://", 1)[0].lower()
        spec = _BACKENDS.get(scheme)
        if spec is None:
            raise StoreError(f"no store for {scheme!r} URLs (known: {', '.join(sorted(_BACKENDS))}, or a SQLite path)")
        module, _, name = spec.partition(":")
        try:
            return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
        except (ImportError, AttributeError) as e:
            raise StoreError(f"the {scheme} store is not available ({e}); install context-compactor[postgres]") from e
    if isinstance(target, (str, os.PathLike)):
        # Looked up by name, as every backend is: this module defines what a store is and does
        # not depend on one (the SQLite store imports it).
        module, _, name = _SQLITE.partition(":")
        sqlite_store: type[SessionStore] = getattr(importlib.import_module(module), name)
        return sqlite_store
    raise StoreError(f"expected a path, ':memory:' or a database URL, got {type(target).__name__}")


# -- shared by the stores: compactions() and expand() over the rows each store fetches ---------------------


def stored_compactions(comps: Iterable[Sequence[Any]], links: Iterable[Sequence[Any]]) -> list[StoredCompaction]:
    """:meth:`SessionStore.compactions` from two queries' rows: ``comps`` as ``(id, created_at,
    strategy, summary, tokens_before, tokens_after, upto_seq, details JSON)`` ordered by id, and
    ``links`` (the records) as ``(compaction, message, action, detail)`` ordered by compaction
    and message."""
    records: dict[int, list[tuple[int, str, str]]] = {}
    for comp, message, action, detail in links:
        records.setdefault(int(comp), []).append((int(message), action, detail))
    return [
        StoredCompaction(
            int(cid),
            created,
            strategy,
            summary,
            int(before),
            int(after),
            int(upto),
            json.loads(details),
            tuple(records.get(int(cid), ())),
        )
        for cid, created, strategy, summary, before, after, upto, details in comps
    ]


#: A question :func:`expand_walk` asks its store, and what the store answers:
#: ``("record", [compaction])``: the row ids of that compaction's record (every action);
#: ``("removed", compactions)``: the row ids their records removed (actions in :data:`REMOVED`);
#: ``("rows", ids)``: ``{id: (kind, seq, source, compaction, JSON text)}`` for each of the ids.
Question = tuple[str, list[int]]


def expand_walk(compaction_id: int) -> Generator[Question, Any, list[str]]:
    """:meth:`SessionStore.expand` as a walk that asks its store for rows (a generator: the sync
    stores answer with :func:`walk`, the async one in its own loop): an original is the answer,
    an edited copy stands for its source, a summary for the rows its compaction removed. One
    question per level of the walk, not one per row. Returns the originals' JSON in seq order."""
    todo: list[int] = list((yield ("record", [compaction_id])))
    seen: set[int] = set()
    originals: list[tuple[int, str]] = []
    while todo:
        batch = [rid for rid in dict.fromkeys(todo) if rid not in seen]
        if not batch:
            break
        seen.update(batch)
        rows = yield ("rows", batch)
        todo, summaries = [], []
        for rid in batch:
            kind, seq, source, comp, text = rows[rid]
            if kind == "original":
                originals.append((int(seq), text))
            elif kind == "edited" and source is not None:
                todo.append(int(source))
            elif kind == "summary" and comp is not None:
                summaries.append(int(comp))
        if summaries:
            todo.extend(int(r) for r in (yield ("removed", summaries)))
    return [text for _, text in sorted(originals)]


def walk(steps: Generator[Question, Any, list[str]], answer: Callable[[str, list[int]], Any]) -> list[str]:
    """Run :func:`expand_walk` against a sync store's ``answer(question, ids)``."""
    reply: Any = None
    while True:
        try:
            kind, ids = steps.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply = answer(kind, ids)
