"""The async methods of :class:`~context_compactor.session.Session`: ``await Session.aopen(...)``,
``aappend``, ``aextend``, ``acontext``, ``ahistory``, ``acheck``, ``aprepare``, ``acompactions``,
``aexpand``, ``arecord_usage``, ``aclose``, ``async with``.

Design note (what was built and why). Two paths, chosen by the store:

* **PostgreSQL: native.** The store's async twin (:meth:`PostgresStore.aio()
  <context_compactor._postgres.PostgresStore.aio>`, an
  :class:`~context_compactor._postgres_async.AsyncPostgresStore` on psycopg's
  ``AsyncConnection``) runs every store call with ``await``: no worker thread, and the event loop
  is never blocked by a query, a lock wait on the server included. Its operations are the sync
  store's own code (:mod:`context_compactor._ops`): the same SQL, the same transactions (one
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from context_compactor import telemetry as _otel
from context_compactor._recall_scope import session_scope
from context_compactor._session_core import ATTEMPTS, RESTORE_USAGE, CompactionRecord, Retry, SessionCore, Snapshot
from context_compactor._store import AsyncSessionStore, SessionStore, finish
from context_compactor.errors import MessageTypeError, StoreError

if TYPE_CHECKING:
    from context_compactor._session_background import BackgroundPolicy
    from context_compactor.compactor import CompactionCheck, ContextCompactor
    from context_compactor.results import CompactResult
    from context_compactor.session import Session

__all__ = ["AsyncParts", "off_loop"]

T = TypeVar("T")


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


class AsyncParts:
    """The async methods of a :class:`~context_compactor.session.Session`: a part it holds, driving
    its :class:`~context_compactor._session_core.SessionCore` (and its background policy) from an
    event loop; the Session's ``a*`` methods call these."""

    def __init__(self, session: Session, core: SessionCore, background: BackgroundPolicy) -> None:
        self._session = session
        self._core = core
        self._background = background

    # -- opening ----------------------------------------------------------------------------------------------

    async def open(
        self,
        store: str | os.PathLike[str] | SessionStore | None,
        *,
        system: Any,
        tools: Sequence[Any] | None,
        format: str | None,
        timeout: float,
    ) -> None:
        """Open the store (when given a path or URL) and the session, never blocking the loop
        (:meth:`Session.aopen <context_compactor.session.Session.aopen>`)."""
        core = self._core
        args = core.open_args(system, tools, format)
        if isinstance(store, SessionStore):
            core.store, core.own_store = store, False
        elif isinstance(store, (str, os.PathLike)):
            core.store, core.own_store = await SessionStore.aopen(store, timeout=timeout), True
        else:
            raise MessageTypeError(
                f"store: expected a path, ':memory:' or a SessionStore, got {type(store).__name__}", None, "store"
            )
        try:
            astore = await core.store.aio()
            if astore is None:
                await off_loop(core.open, system, tools, format)
            else:
                await finish(asyncio.ensure_future(self._aopen_on(astore, args, format)))
        except BaseException:  # a cancelled aopen too: it leaves no connection open
            if core.own_store:
                await core.store.aclose()
            raise

    async def _aopen_on(self, astore: AsyncSessionStore, args: dict[str, Any], forced: str | None) -> None:
        info = await astore.open_session(self._core.id, **args)
        async with self._alocked():
            self._core.opened(info, forced)
            head = self._core.head
        reports = await astore.learned_usage(self._core.id, head, RESTORE_USAGE)
        async with self._alocked():
            self._core.calibrate(reports)

    # -- the native path's helpers ---------------------------------------------------------------------------

    def _alocked(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The store's thread lock, taken without blocking the loop (another thread may hold it
        for a sync store call); never held across an ``await`` by the native path."""
        return self._core.store.alocked()

    async def _arefresh(self, astore: AsyncSessionStore) -> None:
        """Catch up with what was committed (by any connection) since the context we hold."""
        for _ in range(100):
            async with self._alocked():
                since, seen = self._core.since(), (self._core.head, self._core.last_seq, len(self._core.msgs))
            ctx = await astore.load_context(self._core.id, **since)
            async with self._alocked():
                # Another task changed the in-memory context meanwhile: read again from there.
                if (self._core.head, self._core.last_seq, len(self._core.msgs)) == seen and self._core.since() == since:
                    self._core.take(ctx)
                    return
        raise StoreError("the session kept changing while it was read")

    async def _native(self) -> AsyncSessionStore | None:
        """The store's async twin for this loop (the native path), else ``None`` (a worker thread)."""
        return await self._core.store.aio()

    # -- appending and reading --------------------------------------------------------------------------------

    async def aextend(self, messages: Iterable[Any]) -> list[int]:
        """:meth:`extend` (one transaction) without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            listed = messages if isinstance(messages, (str, bytes, bytearray, Mapping, Sequence)) else list(messages)
            return await off_loop(self._session.extend, listed)
        encoded = self._core.checked(messages)
        if not encoded:
            return []
        return await self._aextend_on(astore, encoded)

    async def _aextend_on(self, astore: AsyncSessionStore, encoded: list[tuple[dict[str, Any], str]]) -> list[int]:
        done = await astore.append_rows(self._core.id, [(plain.get("role"), text) for plain, text in encoded])
        async with self._alocked():
            in_step = self._core.appended(done, [p for p, _ in encoded])
        if not in_step:
            await self._arefresh(astore)
        return list(done.ids)

    async def acontext(self) -> list[dict[str, Any]]:
        """:meth:`context`, read without blocking the event loop (PostgreSQL reads the server each time)."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self._session.context)
        await self._arefresh(astore)
        async with self._alocked():
            snapshot = list(self._core.msgs)
            self._core.sent = (snapshot, self._core.head)
            return list(snapshot)

    async def ahistory(self) -> list[dict[str, Any]]:
        """:meth:`history`, read without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self._session.history)
        return [json.loads(text) for _, text in await astore.history(self._core.id)]

    async def acheck(self) -> CompactionCheck:
        """:meth:`check`, without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self._session.check)
        await self._arefresh(astore)
        async with self._alocked():
            return self._core.make_check()

    async def acompactions(self) -> list[CompactionRecord]:
        """:meth:`compactions`, read without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self._session.compactions)
        return self._core.records(await astore.compactions(self._core.id))

    async def aexpand(self, record_id: int) -> list[dict[str, Any]]:
        """:meth:`expand`, read without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self._session.expand, record_id)
        return [json.loads(text) for text in await astore.expand(self._core.id, record_id)]

    async def arecord_usage(self, usage: Any, model: str | None = None) -> bool:
        """:meth:`record_usage`, without blocking the event loop."""
        astore = await self._native()
        if astore is None:
            return await off_loop(self._session.record_usage, usage, model)
        await self._arefresh(astore)
        async with self._alocked():
            sent = self._core.sent if self._core.sent is not None else (list(self._core.msgs), self._core.head)
            report = self._core.usage_report(usage, model, sent)
        await astore.add_usage(self._core.id, **report)
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
        self._core.check_open()
        deadline = time.monotonic() + self._core.wait()
        while not self._core.compacting.acquire(blocking=False):
            if time.monotonic() > deadline:
                raise StoreError("another prepare() of this Session ran too long")
            await asyncio.sleep(0.005)
        conversation = _otel.enter(self._core.id)
        try:
            if force:
                self._background.cancel()
            if not self._core.compactor.config.background or force:
                return await self._aforeground(self._core.compactor, force, instructions)
            steps = self._background.steps(instructions)
            value: Any = None
            now: Any = None  # a foreground result: acompact() recorded its telemetry
            while True:
                kind, arg = await off_loop(_step, steps, value)  # the store calls, off the loop
                if kind == "done":
                    return _otel.mark(arg, now)
                value = None
                if kind == "hook":
                    fn, payload = arg
                    r = fn(payload)
                    if inspect.isawaitable(r):
                        await r
                elif kind == "now":
                    value = now = await self._aforeground(self._background.rule_compactor(), False, instructions)
                elif kind == "run":
                    await arg.arun()
                elif kind == "wait":
                    await arg[0].await_done(arg[1])
                else:
                    arg.start_task()
        finally:
            _otel.leave(conversation)
            self._core.compacting.release()

    async def _aforeground(
        self, compactor: ContextCompactor, force: bool, instructions: str | None
    ) -> CompactResult | None:
        astore = await self._native()
        for _ in range(ATTEMPTS):
            if astore is None:
                snap = await off_loop(self._core.begin, force)
            else:
                await self._arefresh(astore)
                async with self._alocked():
                    snap = self._core.decide(force)
            if snap is None:
                return None
            with session_scope():
                result = await compactor.acompact(
                    snap.messages,
                    system=snap.system,
                    tools=self._core.tools,
                    format=self._core.fmt,
                    force=force,
                    instructions=instructions,
                    state=self._core.state,
                )
            if astore is None:
                done = await off_loop(self._core.settle, snap, result)
            else:
                done = await self._asettle(astore, snap, result)
            if not isinstance(done, Retry):
                return done
        raise StoreError(f"other connections compacted this session first {ATTEMPTS} times in a row")

    async def _asettle(self, astore: AsyncSessionStore, snap: Snapshot, result: CompactResult) -> Any:
        """:meth:`Session._settle` on the async store: save the compaction (one transaction, if
        the head is still the snapshot's), install it with the delta rule, say what to return."""
        result = self._core.budgeted(result)
        saved: CompactResult | None = result
        if result.compacted or result.repairs:
            new, msgs, record, system_changed = self._core.compaction(snap, result)
            stored = await astore.save_compaction(self._core.id, new)
            if stored is None:
                self._core.lost_race()
                saved = None
            else:
                async with self._alocked():
                    self._core.install(snap, stored, msgs, result, system_changed)
                saved = replace(result, record=record)
        await self._arefresh(astore)
        async with self._alocked():
            must = self._core.must_answer(self._core.make_check())
        return self._core.settled(saved, must)

    # -- closing ----------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop: cancels a background job, closes the
        store's async connection of this loop and the store, if this Session opened it."""
        self._core.closed = True
        job, self._background.job = self._background.job, None
        if job is not None:
            job.cancel()
            await off_loop(job.join, 1.0)
        if self._core.own_store:
            await self._core.store.aclose()
