"""The async PostgreSQL store: :class:`AsyncPostgresStore`, on psycopg's ``AsyncConnection``.

The same operations as the sync :class:`~context_compactor._postgres.PostgresStore`, from the same
code (:mod:`context_compactor._pg_ops`: every SQL text, the session's row lock, the head check of
a compaction, the delta rule, the schema checks and migrations), driven here with ``await``: a
query never blocks the event loop, and no worker thread is involved. One transaction per
operation, as in the sync store; operations on one store are serialised by an ``asyncio`` lock
(``timeout`` seconds at most), like the sync store's thread lock.

Where it comes from: :meth:`PostgresStore.aio() <context_compactor._postgres.PostgresStore.aio>`
(what a Session's async methods use: one twin per event loop, opened on first use) or
``await AsyncPostgresStore.connect(url)`` for direct use.

Event loops: a connection belongs to the loop it was opened on (its socket is watched by that
loop). Used from another loop, an operation raises :class:`StoreError` saying so, never hangs;
``PostgresStore.aio()`` gives each loop its own twin, so a Session works across
``asyncio.run()`` calls and in loops of several threads.

Cancellation: an operation runs to its end once started (:func:`~context_compactor._store.finish`):
a cancelled caller sees :class:`asyncio.CancelledError` after the transaction committed or rolled
back, so the connection is never left mid-query and the caller knows the store's state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import psycopg

from context_compactor import _pg_ops as ops
from context_compactor._pg_ops import READ, SCHEMA_VERSION, WRITE, Op, T, wrap
from context_compactor._store import (
    Appended,
    AsyncSessionStore,
    NewCompaction,
    Saved,
    SessionInfo,
    StoredCompaction,
    StoredContext,
    finish,
)
from context_compactor.errors import StoreError

__all__ = ["AsyncPostgresStore", "arun"]


async def _execute(conn: psycopg.AsyncConnection[Any], mode: str, query: Any, params: Sequence[Any]) -> Any:
    """Run one statement of an operation (the modes of :mod:`context_compactor._pg_ops`)."""
    if mode in ("many", "ids"):
        if not params:
            return [] if mode == "ids" else None
        async with conn.cursor() as cur:
            if mode == "many":
                await cur.executemany(query, params)
                return None
            await cur.executemany(query, params, returning=True)
            ids: list[int] = []
            while True:
                ids.append(int((await cur.fetchone())[0]))  # type: ignore[index]
                if not cur.nextset():
                    return ids
    cur = await conn.execute(query, params or None)
    if mode == "one":
        return await cur.fetchone()
    return await cur.fetchall() if mode == "all" else None


async def arun(conn: psycopg.AsyncConnection[Any], op: Op[T]) -> T:
    """Drive an operation of :mod:`context_compactor._pg_ops` on ``conn`` (the caller holds the
    transaction)."""
    reply: Any = None
    while True:
        try:
            mode, query, params = op.send(reply)
        except StopIteration as stop:
            return stop.value
        reply = await _execute(conn, mode, query, params)


class AsyncPostgresStore(AsyncSessionStore):
    """Sessions in a PostgreSQL database, through psycopg's ``AsyncConnection``.

    Constructing one does no I/O; :meth:`open` (or ``await AsyncPostgresStore.connect(...)``)
    connects, sets the timeouts and checks (or migrates) the schema. ``async with`` closes it.

    Args:
        url: A libpq connection string (``postgresql://user:password@host:5432/dbname``).
        timeout: Seconds to wait for the connection, for this store's lock (another task) and
            for a session locked by another worker before raising :class:`StoreError`.
        schema: The PostgreSQL schema holding the tables (created when missing).

    Example:
        >>> url = "postgresql://app@db/agents"
        >>> async with await AsyncPostgresStore.connect(url) as store:  # needs a server  # doctest: +SKIP
        ...     print(await store.session_ids())
    """

    def __init__(self, url: str, *, timeout: float = 10.0, schema: str = "context_compactor") -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise StoreError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        self.url = url
        self.timeout = float(timeout)
        self.schema = ops.check_schema_name(schema)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    @classmethod
    async def connect(cls, url: str, *, timeout: float = 10.0, schema: str = "context_compactor") -> AsyncPostgresStore:
        """A store, connected."""
        store = cls(url, timeout=timeout, schema=schema)
        await store.open()
        return store

    async def open(self) -> None:
        """Connect and check the schema, once (later calls return at once)."""
        await self._run("open", None)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connected(self) -> bool:
        """Whether :meth:`open` connected (and the store is not closed)."""
        return self._conn is not None and not self._closed

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    # -- running an operation ---------------------------------------------------------------------------

    def _bind(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop, self._lock = loop, asyncio.Lock()
        elif self._loop is not loop:
            raise StoreError(
                "this async PostgreSQL store was opened on another event loop: open one per loop "
                "(SessionStore.aio() does, and a Session's async methods use it)"
            )
        assert self._lock is not None
        return self._lock

    async def _acquire(self, lock: asyncio.Lock) -> None:
        if not lock.locked():
            await lock.acquire()  # free: taken at once
            return
        # asyncio.wait, not wait_for: a lock acquired as the timeout fires is kept, never leaked.
        task = asyncio.ensure_future(lock.acquire())
        await asyncio.wait({task}, timeout=self.timeout)
        if not task.done():
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            raise StoreError(
                f"the async session store's lock was held by another task for more than {self.timeout:g} s"
            ) from None

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        """The connection (under the lock), opened and the schema checked on first use."""
        if self._conn is not None:
            return self._conn
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self.timeout))
            )
        except psycopg.Error as e:
            raise ops.connect_error(e) from e
        try:
            await arun(conn, ops.setup(self.schema, self.timeout))
            found = await arun(conn, ops.version(self.schema))
            if found > SCHEMA_VERSION:
                raise ops.newer(self.schema, found)
            if found < SCHEMA_VERSION:
                async with conn.transaction():
                    await arun(conn, ops.migrate(self.schema))
        except psycopg.Error as e:
            await conn.close()
            raise wrap(e, "cannot open the PostgreSQL store", self.timeout) from e
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    async def _run(self, what: str, op: Op[T] | None) -> T:
        """One operation in its own transaction (a write, or a ``REPEATABLE READ`` read-only
        snapshot), under the lock, to its end even when the caller is cancelled."""
        if self._closed:
            raise StoreError("the session store is closed")
        lock = self._bind()
        return await finish(asyncio.ensure_future(self._locked_run(lock, what, op)))

    async def _locked_run(self, lock: asyncio.Lock, what: str, op: Op[T] | None) -> T:
        await self._acquire(lock)
        try:
            if self._closed:
                raise StoreError("the session store is closed")
            conn = await self._connection()
            if op is None:
                return None  # type: ignore[return-value]  # open(): connected, nothing to run
            try:
                try:
                    return await arun(conn, op)
                except BaseException:
                    if ops.open_transaction(conn):
                        with contextlib.suppress(psycopg.Error):
                            await conn.execute("ROLLBACK")
                    raise
            except psycopg.Error as e:
                raise wrap(e, what, self.timeout) from e
        finally:
            lock.release()

    async def query(self, sql_text: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query and return all rows (for inspection and tests)."""
        return await self._run("read", ops.transaction(READ, ops.query(sql_text, params)))

    # -- the operations (:mod:`context_compactor._pg_ops`) ----------------------------------------------

    async def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        return await self._run(
            "open a session", ops.transaction(WRITE, ops.open_session(session_id, system, tools, format))
        )

    async def load_context(
        self, session_id: str, *, head: int | None = None, after_seq: int | None = None
    ) -> StoredContext:
        return await self._run("read", ops.load_context(session_id, head, after_seq))

    async def append_rows(self, session_id: str, rows: Sequence[tuple[str, str]]) -> Appended:
        return await self._run("append", ops.append_rows(session_id, rows))

    async def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        return await self._run("save a compaction", ops.transaction(WRITE, ops.save_compaction(session_id, compaction)))

    async def compactions(self, session_id: str) -> list[StoredCompaction]:
        return await self._run("read", ops.transaction(READ, ops.compactions(session_id)))

    async def expand(self, session_id: str, compaction_id: int) -> list[str]:
        return await self._run("read", ops.transaction(READ, ops.expand(session_id, compaction_id)))

    async def history(self, session_id: str) -> list[tuple[int, str]]:
        return await self._run("read", ops.transaction(READ, ops.history(session_id)))

    async def message(self, session_id: str, row_id: int) -> str | None:
        return await self._run("read", ops.transaction(READ, ops.message(session_id, row_id)))

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
    ) -> None:
        await self._run(
            "record usage", ops.add_usage(session_id, model, prompt_tokens, usage, head, context_len, learned)
        )

    async def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        return await self._run("read", ops.transaction(READ, ops.learned_usage(session_id, head, limit)))

    async def session_ids(self) -> list[str]:
        return await self._run("read", ops.transaction(READ, ops.session_ids()))

    async def delete_session(self, session_id: str) -> bool:
        return await self._run("delete a session", ops.transaction(WRITE, ops.delete_session(session_id)))

    async def pop_original(self, session_id: str) -> tuple[int, str] | None:
        return await self._run("pop an original", ops.transaction(WRITE, ops.pop_original(session_id)))

    # -- closing -----------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection, after the operation running on it (idempotent)."""
        if self._closed:
            return
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self.close_now()
            return
        lock = self._bind()
        await self._acquire(lock)
        try:
            self._closed = True
            if self._conn is not None:
                await self._conn.close()
        finally:
            lock.release()

    def close_now(self) -> None:
        """Close the connection from sync code or another loop (its socket; nothing is awaited).
        An operation running on it meanwhile fails with :class:`StoreError`."""
        self._closed = True
        if self._conn is not None:
            self._conn.pgconn.finish()

    async def __aenter__(self) -> AsyncPostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncPostgresStore(schema={self.schema!r}, timeout={self.timeout:g}, closed={self._closed})"
