"""The PostgreSQL store: :class:`PostgresStore`, behind ``SessionStore("postgresql://...")``
(extra ``[postgres]``: psycopg 3).

The operations and their guarantees are :mod:`context_compactor._store`'s; this module owns the
SQL that implements them, with the SQLite store's tables (:mod:`context_compactor._sqlite`) in a
PostgreSQL schema of their own (``context_compactor`` by default, ``schema=`` to change it), so
they never meet an application's own ``sessions`` or ``messages`` tables.

For agent services whose workers run on several hosts: every worker opens its own store on the
same database, and they may append to and compact the same session.

Transactions and locks:

- Each append (or ``extend`` batch) and each compaction is one transaction that starts by
  locking the session's row (``SELECT ... FOR UPDATE``): appends to a session are serialized
  (seqs have no gaps or duplicates), a compaction's head check and its new head are atomic, and
  appends to other sessions never wait. A compaction computed on a snapshot is saved over the
  rows appended since (the delta rule: they follow its context verbatim); one whose base head
  moved meanwhile is refused (``None``) and planned again by the Session.
- Reads (the context, the compactions, ``expand``) run in one ``REPEATABLE READ`` read-only
  transaction: one consistent snapshot.
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
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
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
    now,
)
from context_compactor.errors import StoreError

try:
    import psycopg
    from psycopg import sql
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError("the PostgreSQL store needs psycopg 3: pip install 'context-compactor[postgres]'") from e

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]

_V1 = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    format TEXT CHECK (format IN ('openai', 'anthropic')),
    system TEXT,
    tools TEXT,
    last_seq BIGINT NOT NULL DEFAULT 0,
    head BIGINT
);
CREATE TABLE compactions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at DOUBLE PRECISION NOT NULL,
    upto_seq BIGINT NOT NULL,
    strategy TEXT NOT NULL,
    summary TEXT,
    tokens_before BIGINT NOT NULL,
    tokens_after BIGINT NOT NULL,
    system TEXT,
    details TEXT NOT NULL
);
ALTER TABLE sessions ADD FOREIGN KEY (head) REFERENCES compactions(id) DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX compactions_session ON compactions(session, id);
CREATE TABLE messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq BIGINT,
    kind TEXT NOT NULL CHECK (kind IN ('original', 'summary', 'edited', 'inserted')),
    role TEXT,
    json TEXT NOT NULL,
    source BIGINT REFERENCES messages(id),
    compaction BIGINT REFERENCES compactions(id),
    created_at DOUBLE PRECISION NOT NULL,
    CHECK ((kind = 'original') = (seq IS NOT NULL)),
    UNIQUE (session, seq)
);
CREATE TABLE context_items (
    compaction BIGINT NOT NULL REFERENCES compactions(id) ON DELETE CASCADE,
    pos INTEGER NOT NULL,
    message BIGINT NOT NULL REFERENCES messages(id),
    PRIMARY KEY (compaction, pos)
);
CREATE TABLE summary_of (
    compaction BIGINT NOT NULL REFERENCES compactions(id) ON DELETE CASCADE,
    message BIGINT NOT NULL REFERENCES messages(id),
    action TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (compaction, message, action)
);
CREATE INDEX summary_of_message ON summary_of(message)
"""

_V2 = """
CREATE TABLE usage (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at DOUBLE PRECISION NOT NULL,
    model TEXT,
    prompt_tokens BIGINT,
    usage TEXT,
    head BIGINT,
    context_len BIGINT NOT NULL,
    learned BOOLEAN NOT NULL
);
CREATE INDEX usage_session ON usage(session, id)
"""

#: ``(version, script)``: the script that brings a store from ``version - 1`` to ``version``
#: (the same versions as the SQLite store's).
MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2))
#: The schema version this package writes.
SCHEMA_VERSION = MIGRATIONS[-1][0]

#: The advisory lock key migrations hold (an arbitrary constant: "ccmigr" in ASCII).
_MIGRATION_LOCK = 0x63636D69677200

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _wrap(e: Exception, what: str, timeout: float) -> StoreError:
    text = str(e).strip()
    if isinstance(e, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)):
        return StoreError(
            f"{what}: the session stayed locked by another connection for more than {timeout:g} s ({text})"
        )
    return StoreError(f"{what}: {type(e).__name__}: {text}")


def _insert_returning(conn: psycopg.Connection[Any], statement: str, params: list[tuple[Any, ...]]) -> list[int]:
    """Run an ``INSERT ... RETURNING id`` for each parameter tuple in one pipelined batch (one
    round trip, not one per row) and return the ids in order."""
    if not params:
        return []
    ids: list[int] = []
    with conn.cursor() as cur:
        cur.executemany(statement, params, returning=True)  # type: ignore[call-overload]
        while True:
            ids.append(int(cur.fetchone()[0]))  # type: ignore[index]
            if not cur.nextset():
                break
    return ids


class PostgresStore(SessionStore):
    """Sessions in a PostgreSQL database (``SessionStore("postgresql://...")`` opens one).

    Args:
        url: A libpq connection string: ``postgresql://user:password@host:5432/dbname`` (or the
            ``key=value`` form, or ``postgres://``).
        timeout: Seconds to wait for the connection, for this store's lock (another thread) and
            for a session locked by another worker before raising :class:`StoreError`.
        schema: The PostgreSQL schema holding the tables (created when missing).

    Raises:
        StoreError: The server cannot be reached, the schema was written by a newer version of
            the package, or a lock is held too long.
    """

    def __init__(self, url: str, *, timeout: float = 10.0, schema: str = "context_compactor") -> None:
        super().__init__(timeout=timeout)
        if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
            raise StoreError(f"schema: expected a lower-case SQL identifier, got {schema!r}")
        self.url = url
        self.schema = schema
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to the PostgreSQL store: {type(e).__name__}: {str(e).strip()}") from e
        try:
            ms = int(self.timeout * 1000)
            self._conn.execute(f"SET lock_timeout = {ms}")
            self._conn.execute(f"SET statement_timeout = {max(ms, 30_000)}")
            self._conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
            self._migrate()
        except psycopg.Error as e:
            self._conn.close()
            raise _wrap(e, "cannot open the PostgreSQL store", self.timeout) from e
        except BaseException:
            self._conn.close()
            raise

    # -- schema ---------------------------------------------------------------------------------------

    def _version(self, conn: psycopg.Connection[Any]) -> int:
        exists = conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'schema_version'",
            (self.schema,),
        ).fetchone()
        if exists is None:
            return 0
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        conn = self._conn
        version = self._version(conn)
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the PostgreSQL schema {self.schema!r} has schema version {version}, newer than this package's "
                f"{SCHEMA_VERSION}: upgrade context-compactor to open it"
            )
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            # Another worker may have migrated while we waited for the lock.
            version = self._version(conn)
            if version == 0:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                conn.execute("INSERT INTO schema_version VALUES (0)")
            for target, script in MIGRATIONS:
                if target > version:
                    for statement in script.split(";"):
                        if statement.strip():
                            conn.execute(statement)  # type: ignore[call-overload]
                    conn.execute("UPDATE schema_version SET version = %s", (target,))

    @property
    def schema_version(self) -> int:
        """The version recorded in ``<schema>.schema_version``."""
        with self.locked():
            try:
                return self._version(self._conn)
            except psycopg.Error as e:
                raise _wrap(e, "read", self.timeout) from e

    # -- transactions ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, what: str = "write") -> Iterator[psycopg.Connection[Any]]:
        """A transaction under the lock: committed when the block ends, rolled back when it
        raises. psycopg errors become :class:`StoreError`."""
        with self.locked():
            try:
                with self._conn.transaction():
                    yield self._conn
            except psycopg.Error as e:
                raise _wrap(e, what, self.timeout) from e

    @contextlib.contextmanager
    def _reading(self) -> Iterator[psycopg.Connection[Any]]:
        """A ``REPEATABLE READ`` read-only transaction under the lock (one consistent snapshot)."""
        with self.locked():
            try:
                with self._conn.transaction():
                    self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    yield self._conn
            except psycopg.Error as e:
                raise _wrap(e, "read", self.timeout) from e

    def query(self, sql_text: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query under the lock and return all rows (for inspection and tests)."""
        with self._reading() as conn:
            return conn.execute(sql_text, params).fetchall()  # type: ignore[call-overload,no-any-return]

    # -- sessions and contexts -------------------------------------------------------------------------

    def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        with self.transaction("open a session") as conn:
            t = now()
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, format, system, tools) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (session_id, t, t, format, system, tools),
            )
            row = conn.execute(
                "SELECT system, tools, format FROM sessions WHERE id = %s FOR UPDATE", (session_id,)
            ).fetchone()
            assert row is not None
            changes = {
                k: v
                for k, v, old in (("system", system, row[0]), ("tools", tools, row[1]), ("format", format, row[2]))
                if v is not None and v != old
            }
            if changes:
                sets = sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in changes)
                conn.execute(
                    sql.SQL("UPDATE sessions SET {}, updated_at = %s WHERE id = %s").format(sets),
                    (*changes.values(), t, session_id),
                )
                row = (changes.get("system", row[0]), changes.get("tools", row[1]), changes.get("format", row[2]))
            context = self._context(conn, session_id, None, None)
        return SessionInfo(row[0], row[1], row[2], context)

    def _context(
        self, conn: psycopg.Connection[Any], session_id: str, head: int | None, after_seq: int | None
    ) -> StoredContext:
        row = conn.execute("SELECT last_seq, head FROM sessions WHERE id = %s", (session_id,)).fetchone()
        if row is None:
            raise StoreError(f"session {session_id!r} was deleted from the store")
        last_seq, stored_head = int(row[0]), row[1]
        upto, system = 0, None
        if stored_head is not None:
            upto, system = conn.execute(
                "SELECT upto_seq, system FROM compactions WHERE id = %s", (stored_head,)
            ).fetchone()  # type: ignore[misc]
            upto = int(upto)
        if after_seq is not None and stored_head == head:
            rows = conn.execute(
                "SELECT id, json FROM messages WHERE session = %s AND seq > %s ORDER BY seq", (session_id, after_seq)
            ).fetchall()
            return StoredContext(head, upto, system, last_seq, tuple((int(i), j) for i, j in rows), False, None)
        out: list[tuple[int, str]] = []
        if stored_head is not None:
            out.extend(
                conn.execute(
                    "SELECT m.id, m.json FROM context_items c JOIN messages m ON m.id = c.message "
                    "WHERE c.compaction = %s ORDER BY c.pos",
                    (stored_head,),
                ).fetchall()
            )
        out.extend(
            conn.execute(
                "SELECT id, json FROM messages WHERE session = %s AND seq > %s ORDER BY seq", (session_id, upto)
            ).fetchall()
        )
        return StoredContext(stored_head, upto, system, last_seq, tuple((int(i), j) for i, j in out), True, None)

    def load_context(self, session_id: str, *, head: int | None = None, after_seq: int | None = None) -> StoredContext:
        with self._reading() as conn:
            return self._context(conn, session_id, head, after_seq)

    def append_rows(self, session_id: str, rows: Sequence[tuple[str, str]]) -> Appended:
        t = now()
        with self.transaction("append") as conn:
            row = conn.execute("SELECT last_seq, head FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} was deleted from the store")
            seq, head = int(row[0]), row[1]
            first = seq + 1
            ids = _insert_returning(
                conn,
                "INSERT INTO messages (session, seq, kind, role, json, created_at) "
                "VALUES (%s, %s, 'original', %s, %s, %s) RETURNING id",
                [(session_id, first + k, role, text, t) for k, (role, text) in enumerate(rows)],
            )
            seq = first + len(rows) - 1
            conn.execute("UPDATE sessions SET last_seq = %s, updated_at = %s WHERE id = %s", (seq, t, session_id))
        return Appended(tuple(ids), first, head, None)

    def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        c = compaction
        t = c.created_at
        with self.transaction("save a compaction") as conn:
            head = conn.execute("SELECT head FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone()
            if head is None or head[0] != c.base_head:
                return None
            comp = int(
                conn.execute(
                    "INSERT INTO compactions (session, created_at, upto_seq, strategy, summary, tokens_before, "
                    "tokens_after, system, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
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
                ).fetchone()[0]  # type: ignore[index]
            )
            derived = iter(
                _insert_returning(
                    conn,
                    "INSERT INTO messages (session, kind, role, json, source, compaction, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    [
                        (session_id, kind, role, text, source, comp, t)
                        for rid, kind, role, text, source in c.context
                        if rid is None
                    ],
                )
            )
            ids = [rid if rid is not None else next(derived) for rid, *_ in c.context]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO context_items (compaction, pos, message) VALUES (%s, %s, %s)",
                    [(comp, pos, rid) for pos, rid in enumerate(ids)],
                )
                cur.executemany(
                    "INSERT INTO summary_of (compaction, message, action, detail) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    [(comp, *e) for e in c.record],
                )
            conn.execute("UPDATE sessions SET head = %s, updated_at = %s WHERE id = %s", (comp, t, session_id))
        return Saved(comp, tuple(ids), None)

    def compactions(self, session_id: str) -> list[StoredCompaction]:
        with self._reading() as conn:
            comps = conn.execute(
                "SELECT id, created_at, strategy, summary, tokens_before, tokens_after, upto_seq, details "
                "FROM compactions WHERE session = %s ORDER BY id",
                (session_id,),
            ).fetchall()
            links: dict[int, list[tuple[int, str, str]]] = {}
            for comp, message, action, detail in conn.execute(
                "SELECT l.compaction, l.message, l.action, l.detail FROM summary_of l "
                "JOIN compactions c ON c.id = l.compaction WHERE c.session = %s ORDER BY l.compaction, l.message",
                (session_id,),
            ).fetchall():
                links.setdefault(int(comp), []).append((int(message), action, detail))
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
                tuple(links.get(int(cid), ())),
            )
            for cid, created, strategy, summary, before, after, upto, details in comps
        ]

    def expand(self, session_id: str, compaction_id: int) -> list[str]:
        with self._reading() as conn:
            if (
                conn.execute(
                    "SELECT 1 FROM compactions WHERE id = %s AND session = %s", (compaction_id, session_id)
                ).fetchone()
                is None
            ):
                raise KeyError(compaction_id)
            todo = [
                int(r[0])
                for r in conn.execute("SELECT message FROM summary_of WHERE compaction = %s", (compaction_id,))
            ]
            seen: set[int] = set()
            originals: list[tuple[int, str]] = []
            removed = sorted(REMOVED)
            while todo:
                rid = todo.pop()
                if rid in seen:
                    continue
                seen.add(rid)
                kind, seq, source, comp, text = conn.execute(
                    "SELECT kind, seq, source, compaction, json FROM messages WHERE id = %s", (rid,)
                ).fetchone()  # type: ignore[misc]
                if kind == "original":
                    originals.append((int(seq), text))
                elif kind == "edited" and source is not None:
                    todo.append(int(source))
                elif kind == "summary" and comp is not None:
                    todo.extend(
                        int(r[0])
                        for r in conn.execute(
                            "SELECT message FROM summary_of WHERE compaction = %s AND action = ANY(%s)",
                            (comp, removed),
                        )
                    )
        return [text for _, text in sorted(originals)]

    def history(self, session_id: str) -> list[tuple[int, str]]:
        return [
            (int(r[0]), r[1])
            for r in self.query(
                "SELECT id, json FROM messages WHERE session = %s AND seq IS NOT NULL ORDER BY seq", (session_id,)
            )
        ]

    def message(self, session_id: str, row_id: int) -> str | None:
        rows = self.query("SELECT json FROM messages WHERE session = %s AND id = %s", (session_id, row_id))
        return rows[0][0] if rows else None  # type: ignore[no-any-return]

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
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (session_id, now(), model, prompt_tokens, usage, head, context_len, bool(learned)),
            )

    def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        rows = self.query(
            "SELECT prompt_tokens, context_len FROM usage WHERE session = %s AND head IS NOT DISTINCT FROM %s "
            "AND learned AND prompt_tokens IS NOT NULL ORDER BY id DESC LIMIT %s",
            (session_id, head, limit),
        )
        return [(int(p), int(n)) for p, n in reversed(rows)]

    # -- sessions --------------------------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        return [r[0] for r in self.query("SELECT id FROM sessions ORDER BY created_at, id")]

    def delete_session(self, session_id: str) -> bool:
        with self.transaction("delete a session") as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone() is None:
                return False
            conn.execute("UPDATE sessions SET head = NULL WHERE id = %s", (session_id,))
            conn.execute("DELETE FROM usage WHERE session = %s", (session_id,))
            for table in ("context_items", "summary_of"):
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE compaction IN {}").format(
                        sql.Identifier(table), sql.SQL("(SELECT id FROM compactions WHERE session = %s)")
                    ),
                    (session_id,),
                )
            conn.execute("UPDATE messages SET source = NULL WHERE session = %s", (session_id,))
            conn.execute("DELETE FROM messages WHERE session = %s", (session_id,))
            conn.execute("DELETE FROM compactions WHERE session = %s", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
            return True

    def pop_original(self, session_id: str) -> tuple[int, str] | None:
        with self.transaction("pop an original") as conn:
            row = conn.execute("SELECT last_seq, head FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} was deleted from the store")
            last_seq, head = int(row[0]), row[1]
            if last_seq == 0:
                return None
            upto = 0
            if head is not None:
                upto = int(conn.execute("SELECT upto_seq FROM compactions WHERE id = %s", (head,)).fetchone()[0])
            if last_seq <= upto:
                raise StoreError(
                    f"the newest message of session {session_id!r} (seq {last_seq}) was compacted: "
                    "it can no longer be taken back"
                )
            rid, text = conn.execute(
                "SELECT id, json FROM messages WHERE session = %s AND seq = %s", (session_id, last_seq)
            ).fetchone()
            conn.execute("DELETE FROM messages WHERE id = %s", (rid,))
            conn.execute(
                "UPDATE sessions SET last_seq = %s, updated_at = %s WHERE id = %s", (last_seq - 1, now(), session_id)
            )
            return int(rid), str(text)

    def _close(self) -> None:
        self._conn.close()

    def __repr__(self) -> str:
        # The URL may hold a password: show the host and database only.
        info = self._conn.info
        return f"SessionStore('postgresql://{info.host}:{info.port}/{info.dbname}', timeout={self.timeout:g})"
