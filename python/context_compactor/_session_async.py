"""The async methods of :class:`~context_compactor.session.Session`: ``await Session.aopen(...)``,
``aappend``, ``aextend``, ``acontext``, ``ahistory``, ``acheck``, ``aprepare``, ``acompactions``,
``aexpand``, ``arecord_usage``, ``aclose``, ``async with``.

Design note (what was built and why). Two paths, chosen by the store:

* **PostgreSQL: native.** The store's async twin (:meth:`PostgresStore.aio()
  <context_compactor._postgres.PostgresStore.aio>`, an
  :class:`~context_compactor._postgres_async.AsyncPostgresStore` on psycopg's
  ``AsyncConnection``) runs every store call with ``await``: no worker thread, and the event loop
  is never blocked by a query, a lock wait on the server included. Its operations are the sync
  store's own code (:mod:`context_compactor._pg_ops`): the same SQL, the same transactions (one
  per append and per compaction, the session's row lock), the same delta rule and schema checks.
  The twin belongs to the running loop, is opened on first use and is kept per loop by the store,
  so a Session works across ``asyncio.run()`` calls; ``aclose()`` closes it.
* **SQLite: a worker thread** (:func:`off_loop`) per store call, since ``sqlite3`` has no async
  driver (a ``synchronous=FULL`` commit is an fsync). The background compaction path
  (``background=True``) takes this path on both stores: its steps are written once for the sync
  and the async drivers (:mod:`context_compactor._session_background`).

In-memory state on the native path: after a store call, the Session updates its in-memory
context under the store's thread lock (taken without blocking the loop: polling), and only when
that context is still the one the call started from; otherwise, or when the update was skipped
(a cancellation), the next read of the store catches up: what other tasks, threads or processes
appended or compacted is never lost or counted twice.

Measured (``benches/bench_store_async.py``: ``aprepare()`` after an append on a 10k-message
PostgreSQL session, native against the thread offload in the same run, with a ticker task
measuring how late the loop wakes it): the figures are in docs/stores.md, "Sessions in PostgreSQL"
section.

Cancellation: a store call, once started, runs to its end (its transaction commits or rolls
back) before the cancelled task sees :class:`asyncio.CancelledError` (:func:`~context_compactor._store.finish`),
so the connection is never left mid-query, the Session's next read sees what the call did, and
no ``prepare()`` overlaps another. A
cancelled ``aappend`` may therefore have committed, as a sync ``append`` whose reply was lost:
the message is in :meth:`history` then, with its row id. A ``aprepare`` cancelled in its
summarizer saves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from context_compactor._session_background import _Retry
from context_compactor._store import AsyncSessionStore, SessionStore, finish
from context_compactor.errors import MessageTypeError, StoreError

if TYPE_CHECKING:
    from typing_extensions import Self

    from context_compactor._session_background import Job, _Snapshot
    from context_compactor._store import Appended, SessionInfo, StoredContext
    from context_compactor.compactor import CompactionCheck, ContextCompactor
    from context_compactor.results import CompactResult

T = TypeVar("T")

#: Calibration is restored on reopen from at most this many usage reports.
RESTORE_USAGE = 4
#: aprepare() gives up (StoreError) after losing this many races to other connections in a row.
_ATTEMPTS = 5


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; a cancellation waits for it to finish, then
    propagates."""
    return await finish(asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs)))


def _step(steps: Any, value: Any) -> tuple[str, Any]:
    """One step of :meth:`Session._background_steps` (its end as ``("done", result)``: a
    StopIteration cannot cross a future)."""
    try:
        return steps.send(value)  # type: ignore[no-any-return]
    except StopIteration as stop:
        return ("done", stop.value)


class AsyncMethods:
    """Mixin of :class:`~context_compactor.session.Session`: the async twins of its methods."""

    if TYPE_CHECKING:
        _store: SessionStore
        _own_store: bool
        _id: str
        _head: int | None
        _last_seq: int
        _msgs: list[dict[str, Any]]
        _sent: tuple[list[dict[str, Any]], int | None] | None
        _closed: bool
        _compacting: Any
        _compactor: ContextCompactor
        _job: Job | None

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...
        def _setup(self, compactor: ContextCompactor, session_id: str | None, format: str | None) -> None: ...
        def _open_args(self, system: Any, tools: Any, format: str | None) -> dict[str, Any]: ...
        def _open(self, system: Any, tools: Any, format: str | None) -> None: ...
        def _opened(self, info: SessionInfo, forced: str | None) -> None: ...
        def _calibrate(self, reports: list[tuple[int, int]]) -> None: ...
        def _take(self, ctx: StoredContext) -> None: ...
        def _since(self) -> dict[str, Any]: ...
        def _checked(self, messages: Iterable[Any]) -> list[tuple[dict[str, Any], str]]: ...
        def _appended(self, done: Appended, plains: list[dict[str, Any]]) -> bool: ...
        def _records(self, stored: Sequence[Any]) -> list[Any]: ...
        def _make_check(self) -> CompactionCheck: ...
        def _must_answer(self, check: CompactionCheck) -> bool: ...
        def _decide(self, force: bool) -> _Snapshot | None: ...
        def _begin(self, force: bool) -> _Snapshot | None: ...
        def _budgeted(self, result: CompactResult) -> CompactResult: ...
        def _settled(self, saved: CompactResult | None, must: bool) -> Any: ...
        def _settle(self, snap: _Snapshot, result: CompactResult) -> Any: ...
        def _compaction(self, snap: _Snapshot, result: CompactResult) -> tuple[Any, list[Any], Any, bool]: ...
        def _install(self, snap: _Snapshot, saved: Any, msgs: list[Any], result: Any, changed: bool) -> None: ...
        def _lost_race(self) -> None: ...
        def _usage_report(self, usage: Any, model: str | None, sent: Any) -> dict[str, Any]: ...
        def _check_open(self) -> None: ...
        def _wait(self) -> float: ...
        def _cancel_job(self) -> None: ...
        def _background_steps(self, instructions: str | None) -> Any: ...
        def _rule_compactor(self) -> ContextCompactor: ...
        def append(self, message: Any) -> int: ...
        def extend(self, messages: Iterable[Any]) -> list[int]: ...
        def context(self) -> list[dict[str, Any]]: ...
        def history(self) -> list[dict[str, Any]]: ...
        def check(self) -> CompactionCheck: ...
        def compactions(self) -> Sequence[Any]: ...
        def expand(self, record_id: int) -> list[dict[str, Any]]: ...
        def record_usage(self, usage: Any, model: str | None = None) -> bool: ...
        def close(self) -> None: ...

    # -- opening ----------------------------------------------------------------------------------------------

    @classmethod
    async def aopen(
        cls,
        compactor: ContextCompactor,
        store: str | os.PathLike[str] | SessionStore,
        session_id: str | None = None,
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        timeout: float = 10.0,
    ) -> Self:
        """The constructor for async code (the constructor's arguments), never blocking the event
        loop: with a ``postgresql://`` URL (or a PostgreSQL :class:`SessionStore`) the store is
        opened and the session read through the store's async connection; with SQLite, in a
        worker thread. A Session opened with the plain constructor works in async code too: its
        async methods open the async connection on first use.

        Example:
            >>> import asyncio
            >>> async def main(store):              # "postgresql://app@db/agents", or a SQLite file
            ...     async with await Session.aopen(compactor, store, "ticket-42") as session:
            ...         await session.aappend({"role": "user", "content": "Fix the failing test."})
            ...         return await session.acontext()
            >>> asyncio.run(main("agent-async.db"))
            [{'role': 'user', 'content': 'Fix the failing test.'}]
        """
        self = cls.__new__(cls)
        self._setup(compactor, session_id, format)
        args = self._open_args(system, tools, format)
        if isinstance(store, SessionStore):
            self._store, self._own_store = store, False
        elif isinstance(store, (str, os.PathLike)):
            self._store, self._own_store = await SessionStore.aopen(store, timeout=timeout), True
        else:
            raise MessageTypeError(
                f"store: expected a path, ':memory:' or a SessionStore, got {type(store).__name__}", None, "store"
            )
        try:
            astore = await self._store.aio()
            if astore is None:
                await off_loop(self._open, system, tools, format)
            else:
                await finish(asyncio.ensure_future(self._aopen_on(astore, args, format)))
        except BaseException:  # a cancelled aopen too: it leaves no connection open
            if self._own_store:
                await self._store.aclose()
            raise
        return self

    async def _aopen_on(self, astore: AsyncSessionStore, args: dict[str, Any], forced: str | None) -> None:
        info = await astore.open_session(self._id, **args)
        async with self._alocked():
            self._opened(info, forced)
            head = self._head
        reports = await astore.learned_usage(self._id, head, RESTORE_USAGE)
        async with self._alocked():
            self._calibrate(reports)

    # -- the native path's helpers ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _alocked(self) -> AsyncIterator[None]:
        """The store's thread lock, taken without blocking the loop (another thread may hold it
        for a sync store call); never held across an ``await`` by the native path."""
        lock = self._store._lock
        deadline = time.monotonic() + self._store.timeout
        while not lock.acquire(blocking=False):
            if time.monotonic() > deadline:
                raise StoreError(
                    f"the session store's lock was held by another thread for more than {self._store.timeout:g} s"
                )
            await asyncio.sleep(0.001)
        try:
            if self._store.closed:
                raise StoreError("the session store is closed")
            yield
        finally:
            lock.release()

    async def _arefresh(self, astore: AsyncSessionStore) -> None:
        """Catch up with what was committed (by any connection) since the context we hold."""
        for _ in range(100):
            async with self._alocked():
                since, seen = self._since(), (self._head, self._last_seq, len(self._msgs))
            ctx = await astore.load_context(self._id, **since)
            async with self._alocked():
                # Another task changed the in-memory context meanwhile: read again from there.
                if (self._head, self._last_seq, len(self._msgs)) == seen and self._since() == since:
                    self._take(ctx)
                    return
        raise StoreError("the session kept changing while it was read")

    async def _native(self) -> AsyncSessionStore | None:
        """The store's async twin for this loop (the native path), else ``None`` (a worker thread)."""
        return await self._store.aio()

    # -- appending and reading --------------------------------------------------------------------------------

    async def aappend(self, message: Any) -> int:
        """:meth:`append` without blocking the event loop. Returns the row id."""
        return (await self.aextend([message]))[0]

    async def aextend(self, messages: Iterable[Any]) -> list[int]:
        """:meth:`extend` (one transaction) without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            listed = messages if isinstance(messages, (str, bytes, bytearray, Mapping, Sequence)) else list(messages)
            return await off_loop(self.extend, listed)
        encoded = self._checked(messages)
        if not encoded:
            return []
        return await self._aextend_on(astore, encoded)

    async def _aextend_on(self, astore: AsyncSessionStore, encoded: list[tuple[dict[str, Any], str]]) -> list[int]:
        done = await astore.append_rows(self._id, [(plain.get("role"), text) for plain, text in encoded])
        async with self._alocked():
            in_step = self._appended(done, [p for p, _ in encoded])
        if not in_step:
            await self._arefresh(astore)
        return list(done.ids)

    async def acontext(self) -> list[dict[str, Any]]:
        """:meth:`context`, read without blocking the event loop (PostgreSQL reads the server each time)."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self.context)
        await self._arefresh(astore)
        async with self._alocked():
            snapshot = list(self._msgs)
            self._sent = (snapshot, self._head)
            return list(snapshot)

    async def ahistory(self) -> list[dict[str, Any]]:
        """:meth:`history`, read without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self.history)
        return [json.loads(text) for _, text in await astore.history(self._id)]

    async def acheck(self) -> CompactionCheck:
        """:meth:`check`, without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self.check)
        await self._arefresh(astore)
        async with self._alocked():
            return self._make_check()

    async def acompactions(self) -> Sequence[Any]:
        """:meth:`compactions`, read without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self.compactions)
        return self._records(await astore.compactions(self._id))

    async def aexpand(self, record_id: int) -> list[dict[str, Any]]:
        """:meth:`expand`, read without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self.expand, record_id)
        return [json.loads(text) for text in await astore.expand(self._id, record_id)]

    async def arecord_usage(self, usage: Any, model: str | None = None) -> bool:
        """:meth:`record_usage`, without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self.record_usage, usage, model)
        await self._arefresh(astore)
        async with self._alocked():
            sent = self._sent if self._sent is not None else (list(self._msgs), self._head)
            report = self._usage_report(usage, model, sent)
        await astore.add_usage(self._id, **report)
        return bool(report["learned"])

    # -- compacting -------------------------------------------------------------------------------------------

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
        self._check_open()
        deadline = time.monotonic() + self._wait()
        while not self._compacting.acquire(blocking=False):
            if time.monotonic() > deadline:
                raise StoreError("another prepare() of this Session ran too long")
            await asyncio.sleep(0.005)
        try:
            if force:
                self._cancel_job()
            if not self._compactor.config.background or force:
                return await self._aforeground(self._compactor, force, instructions)
            steps = self._background_steps(instructions)
            value: Any = None
            while True:
                kind, arg = await off_loop(_step, steps, value)  # the store calls, off the loop
                if kind == "done":
                    return arg  # type: ignore[no-any-return]
                value = None
                if kind == "hook":
                    fn, payload = arg
                    r = fn(payload)
                    if inspect.isawaitable(r):
                        await r
                elif kind == "now":
                    value = await self._aforeground(self._rule_compactor(), False, instructions)
                elif kind == "run":
                    await arg.arun()
                else:
                    arg.start_task()
        finally:
            self._compacting.release()

    async def _aforeground(
        self, compactor: ContextCompactor, force: bool, instructions: str | None
    ) -> CompactResult | None:
        astore = await self._native()
        for _ in range(_ATTEMPTS):
            if astore is None:
                snap = await off_loop(self._begin, force)
            else:
                await self._arefresh(astore)
                async with self._alocked():
                    snap = self._decide(force)
            if snap is None:
                return None
            result = await compactor.acompact(
                snap.messages,
                system=snap.system,
                tools=self._tools,  # type: ignore[attr-defined]
                format=self._fmt,  # type: ignore[attr-defined]
                force=force,
                instructions=instructions,
                state=self._state,  # type: ignore[attr-defined]
            )
            if astore is None:
                done = await off_loop(self._settle, snap, result)
            else:
                done = await self._asettle(astore, snap, result)
            if not isinstance(done, _Retry):
                return done  # type: ignore[no-any-return]
        raise StoreError(f"other connections compacted this session first {_ATTEMPTS} times in a row")

    async def _asettle(self, astore: AsyncSessionStore, snap: _Snapshot, result: CompactResult) -> Any:
        """:meth:`Session._settle` on the async store: save the compaction (one transaction, if
        the head is still the snapshot's), install it with the delta rule, say what to return."""
        result = self._budgeted(result)
        saved: CompactResult | None = result
        if result.compacted or result.repairs:
            new, msgs, record, system_changed = self._compaction(snap, result)
            stored = await astore.save_compaction(self._id, new)
            if stored is None:
                self._lost_race()
                saved = None
            else:
                async with self._alocked():
                    self._install(snap, stored, msgs, result, system_changed)
                saved = replace(result, record=record)
        await self._arefresh(astore)
        async with self._alocked():
            must = self._must_answer(self._make_check())
        return self._settled(saved, must)

    # -- closing ----------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop: cancels a background job, closes the
        store's async connection of this loop and the store, if this Session opened it."""
        self._closed = True
        job, self._job = self._job, None
        if job is not None:
            job.cancel()
            await off_loop(job.join, 1.0)
        if self._own_store:
            await self._store.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
