"""The SQLite store: :class:`SQLiteStore`, the embedded default behind :class:`SessionStore`.

The operations and their guarantees are :mod:`context_compactor._store`'s; this module owns the
SQL that implements them.

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
import json
import os
import sqlite3
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from context_compactor._store import (
    REMOVED,
    Appended,
    NewCompaction,
    Saved,
    SessionInfo,
    SessionStore,
    StoredCompaction,
    StoredContext,
    expand_walk,
    now,
    stored_compactions,
    walk,
)
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


class SQLiteStore(SessionStore):
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

    # -- transactions ----------------------------------------------------------------------------------

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

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction under the lock (one consistent snapshot of the file)."""
        with self.locked():
            conn = self._conn
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as e:
                raise _wrap(e, "read", self.timeout) from e
            try:
                yield conn
            except sqlite3.Error as e:
                raise _wrap(e, "read", self.timeout) from e
            finally:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query under the lock and return all rows (for inspection and tests)."""
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

    # -- sessions and contexts -------------------------------------------------------------------------

    def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        with self.transaction("open a session") as conn:
            row = conn.execute("SELECT system, tools, format FROM sessions WHERE id = ?", (session_id,)).fetchone()
            t = now()
            if row is None:
                conn.execute(
                    "INSERT INTO sessions (id, created_at, updated_at, format, system, tools) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, t, t, format, system, tools),
                )
                row = (system, tools, format)
            else:
                changes = {
                    k: v
                    for k, v, old in (("system", system, row[0]), ("tools", tools, row[1]), ("format", format, row[2]))
                    if v is not None and v != old
                }
                if changes:
                    sets = ", ".join(f"{k} = ?" for k in changes)
                    conn.execute(
                        f"UPDATE sessions SET {sets}, updated_at = ? WHERE id = ?", (*changes.values(), t, session_id)
                    )
                    row = (changes.get("system", row[0]), changes.get("tools", row[1]), changes.get("format", row[2]))
            context = self._context(conn, session_id, None, None, own_write=True)
        return SessionInfo(row[0], row[1], row[2], context)

    def _context(
        self, conn: sqlite3.Connection, session_id: str, head: int | None, after_seq: int | None, own_write: bool
    ) -> StoredContext:
        row = conn.execute("SELECT last_seq, head FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise StoreError(f"session {session_id!r} was deleted from the store")
        last_seq, stored_head = row
        marker = self._marker(conn, own_write)
        if after_seq is not None and stored_head == head:
            rows = conn.execute(
                "SELECT id, json FROM messages WHERE session = ? AND seq > ? ORDER BY seq", (session_id, after_seq)
            ).fetchall()
            upto, system = (0, None)
            if head is not None:
                upto, system = conn.execute("SELECT upto_seq, system FROM compactions WHERE id = ?", (head,)).fetchone()
            return StoredContext(head, upto, system, last_seq, tuple(rows), False, marker)
        out: list[tuple[int, str]] = []
        upto, system = 0, None
        if stored_head is not None:
            upto, system = conn.execute(
                "SELECT upto_seq, system FROM compactions WHERE id = ?", (stored_head,)
            ).fetchone()
            out.extend(
                conn.execute(
                    "SELECT m.id, m.json FROM context_items c JOIN messages m ON m.id = c.message "
                    "WHERE c.compaction = ? ORDER BY c.pos",
                    (stored_head,),
                )
            )
        out.extend(
            conn.execute("SELECT id, json FROM messages WHERE session = ? AND seq > ? ORDER BY seq", (session_id, upto))
        )
        return StoredContext(stored_head, upto, system, last_seq, tuple(out), True, marker)

    def load_context(self, session_id: str, *, head: int | None = None, after_seq: int | None = None) -> StoredContext:
        with self._reading() as conn:
            return self._context(conn, session_id, head, after_seq, own_write=False)

    def append_rows(self, session_id: str, rows: Sequence[tuple[str, str]]) -> Appended:
        t = now()
        with self.transaction("append") as conn:
            row = conn.execute("SELECT last_seq, head FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} was deleted from the store")
            seq, head = row
            first = seq + 1
            ids = []
            for role, text in rows:
                seq += 1
                cur = conn.execute(
                    "INSERT INTO messages (session, seq, kind, role, json, created_at) "
                    "VALUES (?, ?, 'original', ?, ?, ?)",
                    (session_id, seq, role, text, t),
                )
                ids.append(int(cur.lastrowid))  # type: ignore[arg-type]
            conn.execute("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?", (seq, t, session_id))
            marker = self._marker(conn, own_write=True)
        return Appended(tuple(ids), first, head, marker)

    def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        c = compaction
        t = c.created_at
        with self.transaction("save a compaction") as conn:
            head = conn.execute("SELECT head FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if head is None or head[0] != c.base_head:
                return None
            cur = conn.execute(
                "INSERT INTO compactions (session, created_at, upto_seq, strategy, summary, tokens_before, "
                "tokens_after, system, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    t,
                    c.upto_seq,
                    c.strategy,
                    c.summary,
                    c.tokens_before,
                    c.tokens_after,
                    c.system,
                    json.dumps(c.details, ensure_ascii=False, separators=(",", ":")),
                ),
            )
            comp = int(cur.lastrowid)  # type: ignore[arg-type]
            ids: list[int] = []
            for rid, kind, role, text, source in c.context:
                if rid is None:
                    cur = conn.execute(
                        "INSERT INTO messages (session, kind, role, json, source, compaction, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (session_id, kind, role, text, source, comp, t),
                    )
                    rid = int(cur.lastrowid)  # type: ignore[arg-type]
                ids.append(rid)
            conn.executemany(
                "INSERT INTO context_items (compaction, pos, message) VALUES (?, ?, ?)",
                [(comp, pos, rid) for pos, rid in enumerate(ids)],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO summary_of (compaction, message, action, detail) VALUES (?, ?, ?, ?)",
                [(comp, *e) for e in c.record],
            )
            conn.execute("UPDATE sessions SET head = ?, updated_at = ? WHERE id = ?", (comp, t, session_id))
            marker = self._marker(conn, own_write=True)
        return Saved(comp, tuple(ids), marker)

    def compactions(self, session_id: str) -> list[StoredCompaction]:
        with self._reading() as conn:
            comps = conn.execute(
                "SELECT id, created_at, strategy, summary, tokens_before, tokens_after, upto_seq, details "
                "FROM compactions WHERE session = ? ORDER BY id",
                (session_id,),
            ).fetchall()
            links = conn.execute(
                "SELECT l.compaction, l.message, l.action, l.detail FROM summary_of l "
                "JOIN compactions c ON c.id = l.compaction WHERE c.session = ? ORDER BY l.compaction, l.message",
                (session_id,),
            ).fetchall()
        return stored_compactions(comps, links)

    def expand(self, session_id: str, compaction_id: int) -> list[str]:
        with self._reading() as conn:
            found = conn.execute("SELECT 1 FROM compactions WHERE id = ? AND session = ?", (compaction_id, session_id))
            if found.fetchone() is None:
                raise KeyError(compaction_id)
            return walk(expand_walk(compaction_id), lambda kind, ids: _answer(conn, kind, ids))

    def history(self, session_id: str) -> list[tuple[int, str]]:
        return [
            (r[0], r[1])
            for r in self.query(
                "SELECT id, json FROM messages WHERE session = ? AND seq IS NOT NULL ORDER BY seq", (session_id,)
            )
        ]

    def message(self, session_id: str, row_id: int) -> str | None:
        rows = self.query("SELECT json FROM messages WHERE session = ? AND id = ?", (session_id, row_id))
        return rows[0][0] if rows else None

    # -- usage -----------------------------------------------------------------------------------------

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
        with self.transaction("record usage") as conn:
            conn.execute(
                "INSERT INTO usage (session, created_at, model, prompt_tokens, usage, head, context_len, learned) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, now(), model, prompt_tokens, usage, head, context_len, int(learned)),
            )

    def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        rows = self.query(
            "SELECT prompt_tokens, context_len FROM usage WHERE session = ? AND head IS ? AND learned = 1 "
            "AND prompt_tokens IS NOT NULL ORDER BY id DESC LIMIT ?",
            (session_id, head, limit),
        )
        return [(int(p), int(n)) for p, n in reversed(rows)]

    # -- sessions --------------------------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        return [r[0] for r in self.query("SELECT id FROM sessions ORDER BY created_at, id")]

    def delete_session(self, session_id: str) -> bool:
        with self.transaction("delete a session") as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                return False
            conn.execute("UPDATE sessions SET head = NULL WHERE id = ?", (session_id,))
            conn.execute("DELETE FROM usage WHERE session = ?", (session_id,))
            for table in ("context_items", "summary_of"):
                conn.execute(
                    f"DELETE FROM {table} WHERE compaction IN (SELECT id FROM compactions WHERE session = ?)",
                    (session_id,),
                )
            conn.execute("DELETE FROM messages WHERE session = ?", (session_id,))
            conn.execute("DELETE FROM compactions WHERE session = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return True

    def pop_original(self, session_id: str) -> tuple[int, str] | None:
        with self.transaction("pop an original") as conn:
            row = conn.execute("SELECT last_seq, head FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} was deleted from the store")
            last_seq, head = row
            if last_seq == 0:
                return None
            upto = 0
            if head is not None:
                upto = conn.execute("SELECT upto_seq FROM compactions WHERE id = ?", (head,)).fetchone()[0]
            if last_seq <= upto:
                raise StoreError(
                    f"the newest message of session {session_id!r} (seq {last_seq}) was compacted: "
                    "it can no longer be taken back"
                )
            rid, text = conn.execute(
                "SELECT id, json FROM messages WHERE session = ? AND seq = ?", (session_id, last_seq)
            ).fetchone()
            conn.execute("DELETE FROM messages WHERE id = ?", (rid,))
            conn.execute(
                "UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?", (last_seq - 1, now(), session_id)
            )
            return int(rid), str(text)

    def _close(self) -> None:
        self._conn.close()

    def __repr__(self) -> str:
        return f"SessionStore({self.path!r}, timeout={self.timeout:g})"


def _answer(conn: sqlite3.Connection, kind: str, ids: list[int]) -> Any:
    """Answer a question of :func:`~context_compactor._store.expand_walk` (in chunks: SQLite
    limits the parameters of one statement)."""
    rows: dict[int, tuple[Any, ...]] = {}
    found: list[int] = []
    for k in range(0, len(ids), 500):
        chunk = ids[k : k + 500]
        marks = ",".join("?" * len(chunk))
        if kind == "rows":
            for rid, *rest in conn.execute(
                f"SELECT id, kind, seq, source, compaction, json FROM messages WHERE id IN ({marks})", chunk
            ):
                rows[rid] = tuple(rest)
            continue
        actions = "" if kind == "record" else f" AND action IN ({','.join('?' * len(REMOVED))})"
        extra = () if kind == "record" else tuple(sorted(REMOVED))
        links = f"SELECT message FROM summary_of WHERE compaction IN ({marks}){actions}"
        found.extend(r[0] for r in conn.execute(links, (*chunk, *extra)))
    return rows if kind == "rows" else found
