"""The SQLite store: :class:`SQLiteStore`, the embedded default behind :class:`SessionStore`.

The operations and their guarantees are :mod:`context_compactor._store`'s; the SQL of each
operation is :mod:`context_compactor._ops`' (the same code as the PostgreSQL store's, in SQLite's
dialect); this module owns the schema, the connection and the driver that runs them.

Schema (version 2, ``PRAGMA user_version``)::

    sessions(id TEXT PK, created_at REAL, updated_at REAL,
             format TEXT,            -- "openai" | "anthropic" | NULL (detected)
             system TEXT, tools TEXT,-- JSON, NULL when absent
             last_seq INTEGER,       -- seq of the newest original message (0: none)
             head INTEGER)           -- the latest compaction (NULL: none yet)

    messages(id INTEGER PK,          -- the row id Session results name
             session TEXT, seq INTEGER,  -- 1, 2, 3 ... over the originals; NULL for derived rows
             kind TEXT,              -- original | summary | edited | inserted
             role TEXT, json TEXT,   -- the message as compact JSON
             source INTEGER,         -- edited: the row it is an edited copy of
             compaction INTEGER,     -- derived rows: the compaction that made them
             created_at REAL)        -- UNIQUE(session, seq)

    compactions(id INTEGER PK, session TEXT, created_at REAL,
                upto_seq INTEGER,    -- the compaction saw the originals up to this seq
                strategy TEXT, summary TEXT, tokens_before INTEGER, tokens_after INTEGER,
                system TEXT,         -- the system prompt to send from now on, when it changed
                details TEXT)        -- JSON: over_budget, fallback_reason, must_keep, phases,
                                     --       repairs, and the counts the rows below must match

    context_items(compaction, pos, message)              -- the context it produced, in order
    summary_of(compaction, message, action, detail)      -- the record: each replaced or edited row
    usage(id, session, created_at, model, prompt_tokens, usage, head, context_len, learned)

The context to send now is the head compaction's ``context_items`` followed by the originals with
``seq > upto_seq`` (or every original before the first compaction). Summaries and edited copies
(a cleared tool result, cut arguments) are rows too (``kind`` ``summary``/``edited``), so every
entry of a context is a row id and a later compaction can name an earlier summary in its record;
``source`` and ``compaction`` let :meth:`Session.expand` resolve any row back to the originals.

Transactions: each append (or ``extend`` batch) and each compaction is one ``BEGIN IMMEDIATE``
transaction; a compaction writes its row, its derived rows, its context, its ``summary_of`` links
and the session's new ``head`` together, so after a crash (SIGKILL included) the store shows
the old context or the new one, never a mix. WAL journal, ``synchronous=FULL`` by default (an
acknowledged append survives a power cut too; ``NORMAL`` survives a killed process only).

Concurrency: one connection per :class:`SessionStore`, guarded by a re-entrant lock that every
operation takes with a timeout; other processes are kept out by SQLite's own locking with
``busy_timeout``. Either wait running past ``timeout`` raises :class:`StoreError`.

Migrations: ``MIGRATIONS`` lists scripts by the version they lead to; opening a store runs the
missing ones in one transaction and sets ``user_version``. A store written by a newer version of
the package is refused rather than misread.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Hashable, Sequence
from typing import Any

from context_compactor._ops import SQLITE, Op, SQLStore, T
from context_compactor.errors import StoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]

_V1 = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    format TEXT CHECK (format IN ('openai', 'anthropic')),
    system TEXT,
    tools TEXT,
    last_seq INTEGER NOT NULL DEFAULT 0,
    head INTEGER REFERENCES compactions(id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER,
    kind TEXT NOT NULL CHECK (kind IN ('original', 'summary', 'edited', 'inserted')),
    role TEXT,
    json TEXT NOT NULL,
    source INTEGER REFERENCES messages(id),
    compaction INTEGER REFERENCES compactions(id),
    created_at REAL NOT NULL,
    CHECK ((kind = 'original') = (seq IS NOT NULL)),
    UNIQUE (session, seq)
);
CREATE TABLE compactions (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at REAL NOT NULL,
    upto_seq INTEGER NOT NULL,
    strategy TEXT NOT NULL,
    summary TEXT,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    system TEXT,
    details TEXT NOT NULL
);
CREATE INDEX compactions_session ON compactions(session, id);
CREATE TABLE context_items (
    compaction INTEGER NOT NULL REFERENCES compactions(id) ON DELETE CASCADE,
    pos INTEGER NOT NULL,
    message INTEGER NOT NULL REFERENCES messages(id),
    PRIMARY KEY (compaction, pos)
) WITHOUT ROWID;
CREATE TABLE summary_of (
    compaction INTEGER NOT NULL REFERENCES compactions(id) ON DELETE CASCADE,
    message INTEGER NOT NULL REFERENCES messages(id),
    action TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (compaction, message, action)
) WITHOUT ROWID;
CREATE INDEX summary_of_message ON summary_of(message);
"""

_V2 = """
CREATE TABLE usage (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at REAL NOT NULL,
    model TEXT,
    prompt_tokens INTEGER,
    usage TEXT,
    head INTEGER,
    context_len INTEGER NOT NULL,
    learned INTEGER NOT NULL
);
CREATE INDEX usage_session ON usage(session, id);
"""

#: What the application keeps with a session (JSON text the store does not read): the server's
#: format, config and summarizer name (:meth:`SessionStore.session_meta`).
_V3 = """
ALTER TABLE sessions ADD COLUMN meta TEXT;
"""

#: ``(version, script)``: the script that brings a store from ``version - 1`` to ``version``.
MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2), (3, _V3))
#: The schema version this package writes.
SCHEMA_VERSION = MIGRATIONS[-1][0]

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def _wrap(e: sqlite3.Error, what: str, timeout: float) -> StoreError:
    text = str(e)
    if isinstance(e, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreError(f"{what}: the store stayed locked by another connection for more than {timeout:g} s ({text})")
    return StoreError(f"{what}: {type(e).__name__}: {text}")


class SQLiteStore(SQLStore):
    """One SQLite database holding any number of sessions (``SessionStore(path)`` opens one).

    Args:
        path: A file path (created when missing, its folder must exist) or ``":memory:"``.
        timeout: Seconds to wait for this store's lock (another thread) or for SQLite's lock
            (another process) before raising :class:`StoreError`.
        synchronous: SQLite's ``synchronous`` setting: ``"FULL"`` (default: every acknowledged
            write survives a power cut) or ``"NORMAL"`` (survives a killed process; faster).

    Raises:
        StoreError: The file is not a database, was written by a newer schema version, or stays
            locked.
    """

    dialect = SQLITE

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, timeout: float = 10.0, synchronous: str = "FULL"):
        super().__init__(timeout=timeout)
        sync = str(synchronous).upper()
        if sync not in _SYNCHRONOUS:
            raise StoreError(f"synchronous: expected one of {_SYNCHRONOUS}, got {synchronous!r}")
        self.path = os.fspath(path)
        self._writes = 0
        try:
            self._conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise _wrap(e, f"cannot open {self.path!r}", self.timeout) from e
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            if self.path != ":memory:":
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"cannot open {self.path!r}: WAL journal mode unavailable (got {mode!r})")
            self._conn.execute(f"PRAGMA synchronous = {sync}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.Error as e:
            self._conn.close()
            raise _wrap(e, f"cannot open {self.path!r}", self.timeout) from e
        except BaseException:
            self._conn.close()
            raise

    # -- schema ---------------------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path!r} has schema version {version}, newer than this package's {SCHEMA_VERSION}: "
                "upgrade context-compactor to open it"
            )
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            for target, script in MIGRATIONS:
                if target > version:
                    for statement in script.split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {target}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        """The store's ``PRAGMA user_version``."""
        return int(self.query("PRAGMA user_version")[0][0])

    # -- running an operation of :mod:`context_compactor._ops` ----------------------------------------------

    def _execute(self, mode: str, query: str, params: Sequence[Any]) -> Any:
        """Run one statement of an operation (:mod:`context_compactor._ops` names the modes)."""
        conn = self._conn
        if mode == "marker":
            return self._marker(conn, bool(params[0]))
        sql = _sqlite_sql(query)
        if mode == "many":
            conn.executemany(sql, params)
            return None
        if mode == "ids":
            return [int(conn.execute(sql, p).lastrowid) for p in params]  # type: ignore[arg-type]
        cur = conn.execute(sql, params)
        if mode == "id":
            return int(cur.lastrowid)  # type: ignore[arg-type]
        return cur.fetchone() if mode == "one" else cur.fetchall() if mode == "all" else None

    def _do(self, what: str, op: Op[T], *, write: bool = False) -> T:
        """One operation under the lock (it opens its transactions: ``BEGIN IMMEDIATE`` for a
        write, ``BEGIN`` for a read snapshot); after an error, what it left open is rolled back
        and SQLite errors become :class:`StoreError`."""
        with self.locked():
            try:
                reply: Any = None
                try:
                    while True:
                        try:
                            mode, query, params = op.send(reply)
                        except StopIteration as stop:
                            result: T = stop.value
                            break
                        reply = self._execute(mode, query, params)
                except BaseException:
                    if self._conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise _wrap(e, what, self.timeout) from e
            if write:
                self._writes += 1
            return result

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query (SQLite's ``?`` placeholders) under the lock and return all rows (for
        inspection and tests)."""
        with self.locked():
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                raise _wrap(e, "read", self.timeout) from e

    def _marker(self, conn: sqlite3.Connection, own_write: bool = False) -> Hashable:
        # PRAGMA data_version changes when other connections commit; _writes counts ours.
        return (conn.execute("PRAGMA data_version").fetchone()[0], self._writes + (1 if own_write else 0))

    def marker(self) -> Hashable | None:
        """``(PRAGMA data_version`` (other connections' commits), writes through this store)``."""
        with self.locked():
            try:
                return self._marker(self._conn)
            except sqlite3.Error as e:
                raise _wrap(e, "read", self.timeout) from e

    def _close(self) -> None:
        self._conn.close()

    def __repr__(self) -> str:
        return f"SessionStore({self.path!r}, timeout={self.timeout:g})"


@functools.lru_cache(maxsize=256)
def _sqlite_sql(query: str) -> str:
    """An operation's statement with SQLite's placeholders (the operations write psycopg's)."""
    return query.replace("%s", "?")
