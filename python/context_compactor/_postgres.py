"""The PostgreSQL store: :class:`PostgresStore`, behind ``SessionStore("postgresql://...")``
(extra ``[postgres]``: psycopg 3).

The operations and their guarantees are :mod:`context_compactor._store`'s; this module owns the
SQL that implements them, with the SQLite store's tables (:mod:`context_compactor._sqlite`) in a
PostgreSQL schema of their own (``context_compactor`` by default, ``schema=`` to change it), so
they never meet an application's own ``sessions`` or ``messages`` tables.

For agent services whose workers run on several hosts: every worker opens its own store on the
same database, and they may append to and compact the same session.

Transactions and locks:

- Each append (or ``extend`` batch) is one statement, so one transaction and one round trip: it
  updates the session's row (``last_seq``), which locks it, and inserts the rows with the seqs
  it got; appends to a session are serialized (seqs have no gaps or duplicates) and appends to
  other sessions never wait. Each compaction is one transaction that starts by locking the
  session's row (``SELECT ... FOR UPDATE``): its head check and its new head are atomic. A
  compaction computed on a snapshot is saved over the rows appended since (the delta rule: they
  follow its context verbatim); one whose base head moved meanwhile is refused (``None``) and
  planned again by the Session.
- Reads (the context, the compactions, ``expand``) run in one ``REPEATABLE READ`` read-only
  transaction: one consistent snapshot. What was appended since a known point when the head did
  not move (a Session's read before each ``context()``/``prepare()``) is one statement.
- A worker killed mid-transaction (SIGKILL included) leaves nothing: the server rolls the
  transaction back when the connection drops. An acknowledged append is committed on the server
  (durable per the server's own ``fsync``/``synchronous_commit`` settings).
- ``lock_timeout`` and ``statement_timeout`` are the store's ``timeout``: a session locked longer
  than that by another worker raises :class:`StoreError`, never waits forever.

Schema versioning: ``<schema>.schema_version`` holds the version; opening a store takes a
transaction-level advisory lock (so concurrent workers migrate once), runs the missing
``MIGRATIONS`` and records the version, all in one transaction. A database written by a newer
version of the package is refused rather than misread.

Connections: a pool (``psycopg-pool``: autocommit connections, explicit transactions) of at most
``pool_size``, so the threads of a process (a server's requests) that share a store run their
operations at once, each on a connection of its own; one more waits ``timeout`` seconds at most.
``marker()`` is ``None``: a Session reads the context from the server on each ``context()``.

Reconnection: when the server drops connections (a restart, a failover, ``pg_terminate_backend``)
the operations in flight fail with a :class:`StoreError` naming the cause, and the next one runs
on a new connection: a connection the server closed while it sat in the pool is noticed before
use (its socket is readable: no round trip, :func:`~context_compactor._pg_ops.dropped`), closed
and replaced. While the server is down an operation waits for a connection up to ``timeout``.

Async: :meth:`PostgresStore.aio` gives the store's async twin for the running event loop (an
:class:`~context_compactor._postgres_async.AsyncPostgresStore` on its own ``AsyncConnection``,
opened on first use, one per loop, closed with the store), which a Session's async methods use.
``SessionStore.aopen(url)`` opens a store from async code without ever blocking the loop: the sync
connection is then opened only if a sync method needs it.

The SQL and the logic of every operation live in :mod:`context_compactor._ops`, shared with
the async store; this module runs them on a sync connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict

from context_compactor import _ops as ops
from context_compactor import _pg_ops as pg
from context_compactor._ops import POSTGRESQL, READ, Op, SQLStore, T
from context_compactor._pg_ops import MIGRATIONS, SCHEMA_VERSION, wrap
from context_compactor.errors import StoreError

if TYPE_CHECKING:
    from context_compactor._postgres_async import AsyncPostgresStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore", "run"]


def _execute(conn: psycopg.Connection[Any], mode: str, query: Any, params: Sequence[Any]) -> Any:
    """Run one statement of an operation (:mod:`context_compactor._ops` names the modes)."""
    if mode == "marker":
        return None  # every read asks the server
    if mode in ("many", "ids"):
        if not params:
            return [] if mode == "ids" else None
        with conn.cursor() as cur:
            if mode == "many":
                cur.executemany(query, params)
                return None
            # One pipelined batch (one round trip, not one per row), the ids in order.
            cur.executemany(query + " RETURNING id", params, returning=True)
            ids: list[int] = []
            while True:
                ids.append(int(cur.fetchone()[0]))  # type: ignore[index]
                if not cur.nextset():
                    return ids
    if mode == "id":
        return int(conn.execute(query + " RETURNING id", params).fetchone()[0])  # type: ignore[index]
    cur = conn.execute(query, params or None)
    return cur.fetchone() if mode == "one" else cur.fetchall() if mode == "all" else None


def run(conn: psycopg.Connection[Any], op: Op[T]) -> T:
    """Drive an operation of :mod:`context_compactor._ops` on ``conn``."""
    reply: Any = None
    while True:
        try:
            mode, query, params = op.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        reply = _execute(conn, mode, query, params)


class PostgresStore(SQLStore):
    """Sessions in a PostgreSQL database (``SessionStore("postgresql://...")`` opens one).

    Args:
        url: A libpq connection string: ``postgresql://user:password@host:5432/dbname`` (or the
            ``key=value`` form, or ``postgres://``).
        timeout: Seconds to wait for a connection (the server, or a free one of the pool), for
            this store's lock (another thread) and for a session locked by another worker before
            raising :class:`StoreError`.
        schema: The PostgreSQL schema holding the tables (created when missing).
        connect: ``False``: connect (and check the schema) on the first sync operation instead
            of now (``SessionStore.aopen`` does so: async code uses :meth:`aio`'s pool).
        pool_size: The most connections the store opens at once (its async twins have their own).

    Raises:
        StoreError: The server cannot be reached, the schema was written by a newer version of
            the package, or a lock is held too long.
    """

    dialect = POSTGRESQL

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        schema: str = "context_compactor",
        connect: bool = True,
        pool_size: int = 4,
    ) -> None:
        super().__init__(timeout=timeout)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise StoreError(f"pool_size: expected an int >= 1, got {pool_size!r}")
        self.url = url
        self.schema = pg.check_schema_name(schema)
        self.pool_size = pool_size
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = None
        self._pool_lock = threading.Lock()
        self._twins: dict[asyncio.AbstractEventLoop, AsyncPostgresStore] = {}
        self._twins_lock = threading.Lock()
        if connect:
            self._connections()

    @classmethod
    async def _aopen(cls, target: Any, *, timeout: float = 10.0, **kwargs: Any) -> PostgresStore:
        store = cls(target, timeout=timeout, connect=False, **kwargs)
        try:
            await store.aio()
        except BaseException:
            store.close()
            raise
        return store

    def _connections(self) -> psycopg_pool.ConnectionPool[psycopg.Connection[Any]]:
        """The pool, opened on first use: a first connection checks (or migrates) the schema, with
        the server's own error when it cannot connect."""
        with self._pool_lock:
            if self._closed:
                raise StoreError("the session store is closed")
            if self._pool is not None:
                return self._pool
            try:
                first = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.timeout)))
            except psycopg.Error as e:
                raise pg.connect_error(e) from e
            with first:
                try:
                    run(first, pg.setup(self.schema, self.timeout))
                    found = run(first, pg.version(self.schema))
                    if found > SCHEMA_VERSION:
                        raise pg.newer(self.schema, found)
                    if found < SCHEMA_VERSION:
                        with first.transaction():
                            run(first, pg.migrate(self.schema))
                except psycopg.Error as e:
                    raise wrap(e, "cannot open the PostgreSQL store", self.timeout) from e
            self._pool = psycopg_pool.ConnectionPool(
                self.url,
                kwargs={"autocommit": True, "connect_timeout": max(1, int(self.timeout))},
                min_size=1,
                max_size=self.pool_size,
                configure=self._configure,
                timeout=self.timeout,
                num_workers=1,
                open=False,
                name=f"context-compactor-{id(self):x}",
            )
            self._pool.open(wait=False)
            return self._pool

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        run(conn, pg.setup(self.schema, self.timeout))

    @property
    def schema_version(self) -> int:
        """The version recorded in ``<schema>.schema_version``."""
        return self._do("read", pg.version(self.schema))

    # -- running an operation ----------------------------------------------------------------------------

    def _do(self, what: str, op: Op[T], *, write: bool = False) -> T:
        """One operation (its transactions are its own, :func:`~context_compactor._ops.transaction`)
        on a connection of the pool; after an error, what it left open is rolled back. A connection
        the server dropped while it sat in the pool is replaced before use."""
        if self._closed:
            raise StoreError("the session store is closed")
        pool = self._connections()
        try:
            for _ in range(self.pool_size + 1):
                conn = pool.getconn()
                try:
                    if pg.dropped(conn):
                        conn.close()  # the pool replaces it
                        continue
                    try:
                        return run(conn, op)
                    except BaseException:
                        if not conn.closed and pg.open_transaction(conn):
                            with contextlib.suppress(psycopg.Error):
                                conn.execute("ROLLBACK")
                        raise
                finally:
                    pool.putconn(conn)
            raise StoreError(f"{what}: every connection of the pool was dropped by the server")
        except psycopg.Error as e:
            raise wrap(e, what, self.timeout) from e
        except (psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as e:
            raise pg.pool_error(e, what, self.timeout) from e

    def query(self, sql_text: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query (psycopg's ``%s`` placeholders) and return all rows (for inspection
        and tests)."""
        return self._do("read", ops.transaction(POSTGRESQL, READ, ops.query(sql_text, params)))

    # -- the async twins -------------------------------------------------------------------------------

    async def aio(self) -> AsyncPostgresStore:
        """This store's async twin for the running event loop: an
        :class:`~context_compactor._postgres_async.AsyncPostgresStore` with its own pool of
        ``AsyncConnection`` to the same database and schema, opened on first use (without blocking
        the loop) and kept for that loop. Another loop (a second ``asyncio.run``, a loop in
        another thread) gets its own; the twin of a loop that was closed is closed on the next
        call, and :meth:`close` / :meth:`aclose` close them all."""
        from context_compactor._postgres_async import AsyncPostgresStore

        loop = asyncio.get_running_loop()
        with self._twins_lock:
            if self._closed:
                raise StoreError("the session store is closed")
            for other in [k for k in self._twins if k.is_closed()]:
                self._twins.pop(other).close_now()
            twin = self._twins.get(loop)
            if twin is None:
                twin = self._twins[loop] = AsyncPostgresStore(
                    self.url, timeout=self.timeout, schema=self.schema, pool_size=self.pool_size
                )
        if not twin.connected:
            await twin.open()
        return twin

    async def aclose(self) -> None:
        """:meth:`close`, closing the running loop's twin with ``await``."""
        with self._twins_lock:
            twin = self._twins.pop(asyncio.get_running_loop(), None)
        if twin is not None:
            await twin.aclose()
        self.close()

    def _close(self) -> None:
        with self._twins_lock:
            twins, self._twins = list(self._twins.values()), {}
        for twin in twins:
            twin.close_now()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=self.timeout)

    def __repr__(self) -> str:
        # The URL may hold a password: show the host and database only.
        info = conninfo_to_dict(self.url)
        return (
            f"SessionStore('postgresql://{info.get('host', '')}:{info.get('port', 5432)}/{info.get('dbname', '')}', "
            f"timeout={self.timeout:g})"
        )
