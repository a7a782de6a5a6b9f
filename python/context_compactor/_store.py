"""The SQLite store behind :class:`~context_compactor.session.Session`.

Design note — what is stored, and why this shape.

A session is an append-only log of the messages the agent produced (the *originals*), plus a
chain of compactions, each of which says what the model should be sent from then on. Nothing is
ever updated in place except the session row's two pointers (``last_seq``, ``head``), so a reader
sees either the state before a transaction or the state after it.

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
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from context_compactor.errors import StoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SessionStore"]

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

#: ``(version, script)``: the script that brings a store from ``version - 1`` to ``version``.
MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2))
#: The schema version this package writes.
SCHEMA_VERSION = MIGRATIONS[-1][0]

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def _wrap(e: sqlite3.Error, what: str, timeout: float) -> StoreError:
    text = str(e)
    if isinstance(e, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreError(f"{what}: the store stayed locked by another connection for more than {timeout:g} s ({text})")
    return StoreError(f"{what}: {type(e).__name__}: {text}")


class SessionStore:
    """One SQLite database holding any number of sessions.

    Pass a path (or ``":memory:"``) to :class:`~context_compactor.session.Session` and it opens its
    own store; create a ``SessionStore`` yourself to share one connection between sessions (the
    only way two ``Session`` objects see the same ``":memory:"`` database).

    Args:
        path: A file path (created when missing, its folder must exist) or ``":memory:"``.
        timeout: Seconds to wait for this store's lock (another thread) or for SQLite's lock
            (another process) before raising :class:`StoreError`.
        synchronous: SQLite's ``synchronous`` setting: ``"FULL"`` (default: every acknowledged
            write survives a power cut) or ``"NORMAL"`` (survives a killed process; faster).

    Raises:
        StoreError: The file is not a database, was written by a newer schema version, or stays
            locked.

    Example:
        >>> store = SessionStore(":memory:")
        >>> store.schema_version
        2
        >>> store.session_ids()
        []
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, timeout: float = 10.0, synchronous: str = "FULL"):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise StoreError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        sync = str(synchronous).upper()
        if sync not in _SYNCHRONOUS:
            raise StoreError(f"synchronous: expected one of {_SYNCHRONOUS}, got {synchronous!r}")
        self.path = os.fspath(path)
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._writes = 0
        self._closed = False
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

    # -- locking and transactions ------------------------------------------------------------------------

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

    @contextlib.contextmanager
    def transaction(self, what: str = "write") -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction under the lock: committed when the block ends, rolled
        back when it raises. SQLite errors become :class:`StoreError`."""
        with self.locked():
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise _wrap(e, what, self.timeout) from e
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as e:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise _wrap(e, what, self.timeout) from e
                raise
            self._writes += 1

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query under the lock and return all rows."""
        with self.locked():
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                raise _wrap(e, "read", self.timeout) from e

    def marker(self) -> tuple[int, int]:
        """Changes whenever anything was committed since the last call: ``(PRAGMA data_version``
        (other connections), writes through this store)``. Call under :meth:`locked`."""
        try:
            return (self._conn.execute("PRAGMA data_version").fetchone()[0], self._writes)
        except sqlite3.Error as e:
            raise _wrap(e, "read", self.timeout) from e

    # -- sessions -----------------------------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """The ids of every session in the store, oldest first."""
        return [r[0] for r in self.query("SELECT id FROM sessions ORDER BY created_at, id")]

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything it holds; whether it existed."""
        with self.transaction("delete a session") as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                return False
            conn.execute("UPDATE sessions SET head = NULL WHERE id = ?", (session_id,))
            conn.execute("DELETE FROM usage WHERE session = ?", (session_id,))
            conn.execute(
                "DELETE FROM context_items WHERE compaction IN (SELECT id FROM compactions WHERE session = ?)",
                (session_id,),
            )
            conn.execute(
                "DELETE FROM summary_of WHERE compaction IN (SELECT id FROM compactions WHERE session = ?)",
                (session_id,),
            )
            conn.execute("DELETE FROM messages WHERE session = ?", (session_id,))
            conn.execute("DELETE FROM compactions WHERE session = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return True

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SessionStore({self.path!r}, timeout={self.timeout:g})"


def now() -> float:
    """The timestamps the store writes: seconds since the epoch."""
    return time.time()
