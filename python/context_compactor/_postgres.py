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

Connection: one psycopg connection per store (autocommit, explicit transactions), used under the
store's re-entrant lock, so a store may be shared by the threads of a process. ``marker()`` is
``None``: a Session reads the context from the server on each ``context()``.

Async: :meth:`PostgresStore.aio` gives the store's async twin for the running event loop (an
:class:`~context_compactor._postgres_async.AsyncPostgresStore` on its own ``AsyncConnection``,
opened on first use, one per loop, closed with the store), which a Session's async methods use.
``SessionStore.aopen(url)`` opens a store from async code without ever blocking the loop: the sync
connection is then opened only if a sync method needs it.

The SQL and the logic of every operation live in :mod:`context_compactor._pg_ops`, shared with
the async store; this module runs them on a sync connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from context_compactor import _pg_ops as ops
from context_compactor._pg_ops import MIGRATIONS, READ, SCHEMA_VERSION, WRITE, Op, T, wrap
from context_compactor._store import (
    Appended,
    NewCompaction,
    Saved,
    SessionInfo,
    SessionStore,
    StoredCompaction,
    StoredContext,
)
from context_compactor.errors import StoreError

if TYPE_CHECKING:
    from context_compactor._postgres_async import AsyncPostgresStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore", "run"]


def _execute(conn: psycopg.Connection[Any], mode: str, query: Any, params: Sequence[Any]) -> Any:
    """Run one statement of an operation (:mod:`context_compactor._pg_ops` names the modes)."""
    if mode in ("many", "ids"):
        if not params:
            return [] if mode == "ids" else None
        with conn.cursor() as cur:
            if mode == "many":
                cur.executemany(query, params)
                return None
            # One pipelined batch (one round trip, not one per row), the ids in order.
            cur.executemany(query, params, returning=True)
            ids: list[int] = []
            while True:
                ids.append(int(cur.fetchone()[0]))  # type: ignore[index]
                if not cur.nextset():
                    return ids
    cur = conn.execute(query, params or None)
    return cur.fetchone() if mode == "one" else cur.fetchall() if mode == "all" else None


def run(conn: psycopg.Connection[Any], op: Op[T]) -> T:
    """Drive an operation of :mod:`context_compactor._pg_ops` on ``conn`` (the caller holds the
    transaction)."""
    reply: Any = None
    while True:
        try:
            mode, query, params = op.send(reply)
        except StopIteration as stop:
            return stop.value
        reply = _execute(conn, mode, query, params)


class PostgresStore(SessionStore):
    """Sessions in a PostgreSQL database (``SessionStore("postgresql://...")`` opens one).

    Args:
        url: A libpq connection string: ``postgresql://user:password@host:5432/dbname`` (or the
            ``key=value`` form, or ``postgres://``).
        timeout: Seconds to wait for the connection, for this store's lock (another thread) and
            for a session locked by another worker before raising :class:`StoreError`.
        schema: The PostgreSQL schema holding the tables (created when missing).
        connect: ``False``: connect (and check the schema) on the first sync operation instead
            of now (``SessionStore.aopen`` does so: async code uses :meth:`aio`'s connection).

    Raises:
        StoreError: The server cannot be reached, the schema was written by a newer version of
            the package, or a lock is held too long.
    """

    def __init__(
        self, url: str, *, timeout: float = 10.0, schema: str = "context_compactor", connect: bool = True
    ) -> None:
        super().__init__(timeout=timeout)
        self.url = url
        self.schema = ops.check_schema_name(schema)
        self._conn_: psycopg.Connection[Any] | None = None
        self._twins: dict[asyncio.AbstractEventLoop, AsyncPostgresStore] = {}
        self._twins_lock = threading.Lock()
        if connect:
            with self.locked():
                self._connection()

    @classmethod
    async def _aopen(cls, target: Any, *, timeout: float = 10.0, **kwargs: Any) -> PostgresStore:
        store = cls(target, timeout=timeout, connect=False, **kwargs)
        try:
            await store.aio()
        except BaseException:
            store.close()
            raise
        return store

    def _connection(self) -> psycopg.Connection[Any]:
        """The sync connection (under the lock), opened and the schema migrated on first use."""
        if self._conn_ is not None:
            return self._conn_
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.timeout)))
        except psycopg.Error as e:
            raise ops.connect_error(e) from e
        try:
            run(conn, ops.setup(self.schema, self.timeout))
            found = run(conn, ops.version(self.schema))
            if found > SCHEMA_VERSION:
                raise ops.newer(self.schema, found)
            if found < SCHEMA_VERSION:
                with conn.transaction():
                    run(conn, ops.migrate(self.schema))
        except psycopg.Error as e:
            conn.close()
            raise wrap(e, "cannot open the PostgreSQL store", self.timeout) from e
        except BaseException:
            conn.close()
            raise
        self._conn_ = conn
        return conn

    @property
    def schema_version(self) -> int:
        """The version recorded in ``<schema>.schema_version``."""
        with self.locked():
            try:
                return int(run(self._connection(), ops.version(self.schema)))
            except psycopg.Error as e:
                raise wrap(e, "read", self.timeout) from e

    # -- transactions ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, what: str = "write") -> Iterator[psycopg.Connection[Any]]:
        """A transaction under the lock: committed when the block ends, rolled back when it
        raises. psycopg errors become :class:`StoreError`."""
        with self.locked():
            conn = self._connection()
            try:
                with conn.transaction():
                    yield conn
            except psycopg.Error as e:
                raise wrap(e, what, self.timeout) from e

    def _do(self, what: str, op: Op[T]) -> T:
        """One operation (it opens its transactions, :func:`~context_compactor._pg_ops.transaction`),
        under the lock; after an error, what it left open is rolled back."""
        with self.locked():
            conn = self._connection()
            try:
                try:
                    return run(conn, op)
                except BaseException:
                    if ops.open_transaction(conn):
                        with contextlib.suppress(psycopg.Error):
                            conn.execute("ROLLBACK")
                    raise
            except psycopg.Error as e:
                raise wrap(e, what, self.timeout) from e

    def query(self, sql_text: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query under the lock and return all rows (for inspection and tests)."""
        return self._do("read", ops.transaction(READ, ops.query(sql_text, params)))

    # -- the operations (:mod:`context_compactor._pg_ops`) ---------------------------------------------

    def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        return self._do("open a session", ops.transaction(WRITE, ops.open_session(session_id, system, tools, format)))

    def load_context(self, session_id: str, *, head: int | None = None, after_seq: int | None = None) -> StoredContext:
        return self._do("read", ops.load_context(session_id, head, after_seq))

    def append_rows(self, session_id: str, rows: Sequence[tuple[str, str]]) -> Appended:
        return self._do("append", ops.append_rows(session_id, rows))

    def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        return self._do("save a compaction", ops.transaction(WRITE, ops.save_compaction(session_id, compaction)))

    def compactions(self, session_id: str) -> list[StoredCompaction]:
        return self._do("read", ops.transaction(READ, ops.compactions(session_id)))

    def expand(self, session_id: str, compaction_id: int) -> list[str]:
        return self._do("read", ops.transaction(READ, ops.expand(session_id, compaction_id)))

    def history(self, session_id: str) -> list[tuple[int, str]]:
        return self._do("read", ops.transaction(READ, ops.history(session_id)))

    def message(self, session_id: str, row_id: int) -> str | None:
        return self._do("read", ops.transaction(READ, ops.message(session_id, row_id)))

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
        self._do("record usage", ops.add_usage(session_id, model, prompt_tokens, usage, head, context_len, learned))

    def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        return self._do("read", ops.transaction(READ, ops.learned_usage(session_id, head, limit)))

    def session_ids(self) -> list[str]:
        return self._do("read", ops.transaction(READ, ops.session_ids()))

    def delete_session(self, session_id: str) -> bool:
        return self._do("delete a session", ops.transaction(WRITE, ops.delete_session(session_id)))

    def pop_original(self, session_id: str) -> tuple[int, str] | None:
        return self._do("pop an original", ops.transaction(WRITE, ops.pop_original(session_id)))

    # -- the async twins -------------------------------------------------------------------------------

    async def aio(self) -> AsyncPostgresStore:
        """This store's async twin for the running event loop: an
        :class:`~context_compactor._postgres_async.AsyncPostgresStore` on its own
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
                twin = self._twins[loop] = AsyncPostgresStore(self.url, timeout=self.timeout, schema=self.schema)
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
        if self._conn_ is not None:
            self._conn_.close()

    def __repr__(self) -> str:
        # The URL may hold a password: show the host and database only.
        info = conninfo_to_dict(self.url)
        return (
            f"SessionStore('postgresql://{info.get('host', '')}:{info.get('port', 5432)}/{info.get('dbname', '')}', "
            f"timeout={self.timeout:g})"
        )
