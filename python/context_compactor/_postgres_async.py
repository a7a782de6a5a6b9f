"""The async PostgreSQL store: :class:`AsyncPostgresStore`, on psycopg's ``AsyncConnection``.

The same operations as the sync :class:`~context_compactor._postgres.PostgresStore`, from the same
code (:mod:`context_compactor._ops`: every SQL text, the session's row lock, the head check of
a compaction, the delta rule; :mod:`context_compactor._pg_ops`: the schema checks and
migrations), driven here with ``await``: a query never blocks the event loop, and no worker
thread is involved. One transaction per operation, as in the sync store.

Connections: a pool (:class:`AsyncPool`) of at most ``pool_size``, so the tasks sharing a store
(a server's requests) run their operations at once; one more waits ``timeout`` seconds at most.
A connection the server dropped while it sat in the pool is replaced before use, so after a
server restart only the operations in flight fail (:class:`StoreError`) and the next ones
reconnect on their own. Why not ``psycopg-pool``'s ``AsyncConnectionPool`` (the sync store's
pool is ``psycopg-pool``'s): its maintenance tasks catch ``CancelledError`` as a failed task and
carry on, so an event loop closed without ``await store.aclose()`` (``asyncio.run()`` ending
while a connection is being opened) waits for them forever; a Session used across
``asyncio.run()`` calls ends loops that way. This pool has no background task: a connection is
opened by the operation that needs it.

Where it comes from: :meth:`PostgresStore.aio() <context_compactor._postgres.PostgresStore.aio>`
(what a Session's async methods use: one twin per event loop, opened on first use) or
``await AsyncPostgresStore.connect(url)`` for direct use.

Event loops: a pool and its connections belong to the loop they were opened on (their sockets
are watched by that loop). Used from another loop, an operation raises :class:`StoreError` saying so, never hangs;
``PostgresStore.aio()`` gives each loop its own twin, so a Session works across
``asyncio.run()`` calls and in loops of several threads.

Cancellation: an operation runs to its end once started (:func:`~context_compactor._store.finish`):
a cancelled caller sees :class:`asyncio.CancelledError` after the transaction committed or rolled
back, so the connection is never left mid-query and the caller knows the store's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg

from context_compactor import _ops as ops
from context_compactor import _pg_ops as pg
from context_compactor._ops import POSTGRESQL as D
from context_compactor._ops import READ, Op, T
from context_compactor._pg_ops import SCHEMA_VERSION, wrap
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

__all__ = ["AsyncPool", "AsyncPostgresStore", "arun"]


async def _execute(conn: psycopg.AsyncConnection[Any], mode: str, query: Any, params: Sequence[Any]) -> Any:
    """Run one statement of an operation (the modes of :mod:`context_compactor._ops`)."""
    if mode == "marker":
        return None  # every read asks the server
    if mode in ("many", "ids"):
        if not params:
            return [] if mode == "ids" else None
        async with conn.cursor() as cur:
            if mode == "many":
                await cur.executemany(query, params)
                return None
            await cur.executemany(query + " RETURNING id", params, returning=True)
            ids: list[int] = []
            while True:
                ids.append(int((await cur.fetchone())[0]))  # type: ignore[index]
                if not cur.nextset():
                    return ids
    if mode == "id":
        return int((await (await conn.execute(query + " RETURNING id", params)).fetchone())[0])  # type: ignore[index]
    cur = await conn.execute(query, params or None)
    if mode == "one":
        return await cur.fetchone()
    return await cur.fetchall() if mode == "all" else None


async def arun(conn: psycopg.AsyncConnection[Any], op: Op[T]) -> T:
    """Drive an operation of :mod:`context_compactor._ops` on ``conn`` (the caller holds the
    transaction)."""
    reply: Any = None
    while True:
        try:
            mode, query, params = op.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        reply = await _execute(conn, mode, query, params)


class AsyncPool:
    """At most ``size`` connections opened on demand by ``connect`` (no background task), handed
    out one per operation; idle ones the server dropped are replaced before use."""

    def __init__(
        self, connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]], size: int, timeout: float
    ) -> None:
        self._connect = connect
        self._size = size
        self._timeout = timeout
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._count = 0  # idle + handed out + being opened
        self._closed = False
        self._freed = asyncio.Condition()
        #: Every connection it opened (to close their sockets from another loop).
        self.opened: weakref.WeakSet[psycopg.AsyncConnection[Any]] = weakref.WeakSet()

    async def get(self, what: str) -> psycopg.AsyncConnection[Any]:
        deadline = time.monotonic() + self._timeout
        async with self._freed:
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if not pg.dropped(conn):
                        return conn
                    self._count -= 1
                    await conn.close()
                if self._count < self._size:
                    self._count += 1
                    break
                try:
                    await asyncio.wait_for(self._freed.wait(), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    raise StoreError(
                        f"{what}: no free connection to the PostgreSQL store within {self._timeout:g} s "
                        f"(all {self._size} of the pool are busy)"
                    ) from None
        try:
            conn = await self._open(deadline)
        except BaseException:
            async with self._freed:
                self._count -= 1
                self._freed.notify()
            raise
        self.opened.add(conn)
        return conn

    async def _open(self, deadline: float) -> psycopg.AsyncConnection[Any]:
        """A new connection; while the server is down (a restart), tried again until ``deadline``."""
        pause = 0.05
        while True:
            try:
                return await self._connect()
            except psycopg.OperationalError as e:
                if time.monotonic() + pause > deadline:
                    raise pg.connect_error(e) from e
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def put(self, conn: psycopg.AsyncConnection[Any]) -> None:
        async with self._freed:
            if self._closed or conn.closed or pg.open_transaction(conn):
                self._count -= 1
                with contextlib.suppress(psycopg.Error):
                    await conn.close()
            else:
                self._idle.append(conn)
            self._freed.notify()

    async def close(self) -> None:
        """Close the idle connections; those handed out are closed when they come back."""
        async with self._freed:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(psycopg.Error):
                await conn.close()


class AsyncPostgresStore(AsyncSessionStore):
    """Sessions in a PostgreSQL database, through a pool of psycopg's ``AsyncConnection``.

    Constructing one does no I/O; :meth:`open` (or ``await AsyncPostgresStore.connect(...)``)
    connects, checks (or migrates) the schema and opens the pool. ``async with`` closes it.

    Args:
        url: A libpq connection string (``postgresql://user:password@host:5432/dbname``).
        timeout: Seconds to wait for a connection (the server, or a free one of the pool) and
            for a session locked by another worker before raising :class:`StoreError`.
        schema: The PostgreSQL schema holding the tables (created when missing).
        pool_size: The most connections the store opens at once.

    Example:
        >>> url = "postgresql://app@db/agents"
        >>> async with await AsyncPostgresStore.connect(url) as store:  # needs a server  # doctest: +SKIP
        ...     print(await store.session_ids())
    """

    def __init__(
        self, url: str, *, timeout: float = 10.0, schema: str = "context_compactor", pool_size: int = 4
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise StoreError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise StoreError(f"pool_size: expected an int >= 1, got {pool_size!r}")
        self.url = url
        self.timeout = float(timeout)
        self.schema = pg.check_schema_name(schema)
        self.pool_size = pool_size
        self._pool: AsyncPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: asyncio.Lock | None = None
        self._closed = False

    @classmethod
    async def connect(
        cls, url: str, *, timeout: float = 10.0, schema: str = "context_compactor", pool_size: int = 4
    ) -> AsyncPostgresStore:
        """A store, connected."""
        store = cls(url, timeout=timeout, schema=schema, pool_size=pool_size)
        await store.open()
        return store

    async def open(self) -> None:
        """Connect, check the schema and open the pool, once (later calls return at once)."""
        await self._run("open", None)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connected(self) -> bool:
        """Whether :meth:`open` connected (and the store is not closed)."""
        return self._pool is not None and not self._closed

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    # -- running an operation ---------------------------------------------------------------------------

    def _bind(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop, self._opening = loop, asyncio.Lock()
        elif self._loop is not loop:
            raise StoreError(
                "this async PostgreSQL store was opened on another event loop: open one per loop "
                "(SessionStore.aio() does, and a Session's async methods use it)"
            )
        assert self._opening is not None
        return self._opening

    async def _connections(self, opening: asyncio.Lock) -> AsyncPool:
        """The pool, opened on first use: a first connection checks (or migrates) the schema, with
        the server's own error when it cannot connect."""
        async with opening:
            if self._closed:
                raise StoreError("the session store is closed")
            if self._pool is not None:
                return self._pool
            try:
                first = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(self.timeout))
                )
            except psycopg.Error as e:
                raise pg.connect_error(e) from e
            async with first:
                try:
                    await arun(first, pg.setup(self.schema, self.timeout))
                    found = await arun(first, pg.version(self.schema))
                    if found > SCHEMA_VERSION:
                        raise pg.newer(self.schema, found)
                    if found < SCHEMA_VERSION:
                        async with first.transaction():
                            await arun(first, pg.migrate(self.schema))
                except psycopg.Error as e:
                    raise wrap(e, "cannot open the PostgreSQL store", self.timeout) from e
            pool = AsyncPool(self._new_connection, self.pool_size, self.timeout)
            self._pool = pool
            return pool

    async def _new_connection(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, connect_timeout=max(1, int(self.timeout))
        )
        try:
            await arun(conn, pg.setup(self.schema, self.timeout))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _run(self, what: str, op: Op[T] | None) -> T:
        """One operation in its own transaction (a write, or a ``REPEATABLE READ`` read-only
        snapshot) on a connection of the pool, to its end even when the caller is cancelled."""
        if self._closed:
            raise StoreError("the session store is closed")
        opening = self._bind()
        return await finish(asyncio.ensure_future(self._pooled_run(opening, what, op)))

    async def _pooled_run(self, opening: asyncio.Lock, what: str, op: Op[T] | None) -> T:
        pool = await self._connections(opening)
        if op is None:
            return None  # type: ignore[return-value]  # open(): connected, nothing to run
        try:
            conn = await pool.get(what)
            try:
                return await arun(conn, op)
            except BaseException:
                if not conn.closed and pg.open_transaction(conn):
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
                raise
            finally:
                await pool.put(conn)
        except psycopg.Error as e:
            if self._closed:
                raise StoreError("the session store is closed") from e
            raise wrap(e, what, self.timeout) from e

    async def query(self, sql_text: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query and return all rows (for inspection and tests)."""
        return await self._run("read", ops.transaction(D, READ, ops.query(sql_text, params)))

    # -- the operations (:mod:`context_compactor._ops`) -------------------------------------------------

    async def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        return await self._run("open a session", ops.open_session(D, session_id, system, tools, format))

    async def load_context(
        self, session_id: str, *, head: int | None = None, after_seq: int | None = None
    ) -> StoredContext:
        return await self._run("read", ops.load_context(D, session_id, head, after_seq))

    async def append_rows(self, session_id: str, rows: Sequence[tuple[str | None, str]]) -> Appended:
        return await self._run("append", ops.append_rows(D, session_id, rows))

    async def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        return await self._run("save a compaction", ops.save_compaction(D, session_id, compaction))

    async def compactions(self, session_id: str) -> list[StoredCompaction]:
        return await self._run("read", ops.compactions(D, session_id))

    async def expand(self, session_id: str, compaction_id: int) -> list[str]:
        return await self._run("read", ops.expand(D, session_id, compaction_id))

    async def history(self, session_id: str) -> list[tuple[int, str]]:
        return await self._run("read", ops.history(D, session_id))

    async def message(self, session_id: str, row_id: int) -> str | None:
        return await self._run("read", ops.message(D, session_id, row_id))

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
            "record usage", ops.add_usage(D, session_id, model, prompt_tokens, usage, head, context_len, learned)
        )

    async def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        return await self._run("read", ops.learned_usage(D, session_id, head, limit))

    async def session_ids(self) -> list[str]:
        return await self._run("read", ops.session_ids(D))

    async def delete_session(self, session_id: str) -> bool:
        return await self._run("delete a session", ops.delete_session(D, session_id))

    async def pop_original(self, session_id: str) -> tuple[int, str] | None:
        return await self._run("pop an original", ops.pop_original(D, session_id))

    async def session_meta(self, session_id: str) -> str | None:
        return await self._run("read", ops.session_meta(D, session_id))

    async def set_session_meta(self, session_id: str, meta: str | None) -> None:
        await self._run("write the session's meta", ops.set_session_meta(D, session_id, meta))

    # -- closing -----------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the pool, after the operations running on it (idempotent)."""
        if self._closed:
            return
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self.close_now()
            return
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def close_now(self) -> None:
        """Close the connections from sync code or another loop (their sockets; nothing is
        awaited). An operation running on one meanwhile fails with :class:`StoreError`."""
        self._closed = True
        pool, self._pool = self._pool, None
        for conn in list(pool.opened) if pool is not None else []:
            conn.pgconn.finish()

    async def __aenter__(self) -> AsyncPostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncPostgresStore(schema={self.schema!r}, timeout={self.timeout:g}, closed={self._closed})"
