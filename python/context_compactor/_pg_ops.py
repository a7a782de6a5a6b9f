"""The PostgreSQL store's schema and operations, written once for both drivers: the sync
:class:`~context_compactor._postgres.PostgresStore` (``psycopg.Connection``) and the async
:class:`~context_compactor._postgres_async.AsyncPostgresStore` (``psycopg.AsyncConnection``).

Each operation is a generator that yields the statements it needs, ``(mode, query, params)``,
and receives each one's result; it holds every SQL text and every decision (the session's row
lock, the head check of a compaction, the delta rule, the checks of ``pop_original``). A driver
only runs what it is asked, inside the transaction it opened for the operation (:data:`WRITE`
or :data:`READ`), so the two stores cannot drift apart: same statements, same transactions, same
guarantees (:mod:`context_compactor._postgres` describes them).

Modes: ``"one"`` (``fetchone()``), ``"all"`` (``fetchall()``), ``"exec"`` (no result),
``"many"`` (``executemany``, no result), ``"ids"`` (``executemany`` of an ``INSERT ... RETURNING
id`` in one pipelined batch: the ids in order).
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Sequence
from typing import Any, TypeVar

from context_compactor._store import (
    REMOVED,
    Appended,
    NewCompaction,
    Saved,
    SessionInfo,
    StoredCompaction,
    StoredContext,
    expand_walk,
    now,
    stored_compactions,
)
from context_compactor.errors import StoreError

try:
    import psycopg
    from psycopg import sql
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError("the PostgreSQL store needs psycopg 3: pip install 'context-compactor[postgres]'") from e

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

#: The transaction a driver opens around an operation: a write (committed at the end, rolled back
#: on an error) or one ``REPEATABLE READ`` read-only snapshot; :data:`BEGIN` starts it (one
#: statement: a round trip counts, above all on the async path).
WRITE, READ = "write", "read"
BEGIN = {WRITE: "BEGIN", READ: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}

T = TypeVar("T")
#: An operation: yields ``(mode, query, params)``, receives each result, returns its own.
Op = Generator[tuple[str, Any, Sequence[Any]], Any, T]


def transaction(txn: str, op: Op[T]) -> Op[T]:
    """``op`` in one transaction: :data:`WRITE` or a :data:`READ` snapshot. A driver that sees an
    error rolls back what is open (:func:`open_transaction`)."""
    yield ("exec", BEGIN[txn], ())
    result = yield from op
    yield ("exec", "COMMIT", ())
    return result


def open_transaction(conn: Any) -> bool:
    """Whether ``conn`` (sync or async) is inside a transaction (to roll back after an error)."""
    return bool(conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)


def check_schema_name(schema: Any) -> str:
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise StoreError(f"schema: expected a lower-case SQL identifier, got {schema!r}")
    return schema


def wrap(e: Exception, what: str, timeout: float) -> StoreError:
    """A psycopg error as the :class:`StoreError` the operation raises."""
    text = str(e).strip()
    if isinstance(e, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)):
        return StoreError(
            f"{what}: the session stayed locked by another connection for more than {timeout:g} s ({text})"
        )
    return StoreError(f"{what}: {type(e).__name__}: {text}")


def connect_error(e: Exception) -> StoreError:
    return StoreError(f"cannot connect to the PostgreSQL store: {type(e).__name__}: {str(e).strip()}")


# -- opening: session settings and the schema (outside a transaction, then in one) -------------------------


def setup(schema: str, timeout: float) -> Op[None]:
    """The connection's settings: the store's timeouts and its schema on the search path."""
    ms = int(timeout * 1000)
    yield ("exec", f"SET lock_timeout = {ms}", ())
    yield ("exec", f"SET statement_timeout = {max(ms, 30_000)}", ())
    yield ("exec", sql.SQL("SET search_path = {}").format(sql.Identifier(schema)), ())


def version(schema: str) -> Op[int]:
    """The version recorded in ``<schema>.schema_version`` (0: none)."""
    exists = yield (
        "one",
        "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'schema_version'",
        (schema,),
    )
    if exists is None:
        return 0
    row = yield ("one", "SELECT version FROM schema_version", ())
    return int(row[0]) if row else 0


def newer(schema: str, found: int) -> StoreError:
    return StoreError(
        f"the PostgreSQL schema {schema!r} has schema version {found}, newer than this package's "
        f"{SCHEMA_VERSION}: upgrade context-compactor to open it"
    )


def migrate(schema: str) -> Op[None]:
    """(In a :data:`WRITE` transaction.) Bring the schema to :data:`SCHEMA_VERSION` under a
    transaction-level advisory lock, so concurrent workers migrate once."""
    yield ("exec", "SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    yield ("exec", sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)), ())
    # Another worker may have migrated while we waited for the lock.
    found = yield from version(schema)
    if found > SCHEMA_VERSION:
        raise newer(schema, found)
    if found == 0:
        yield ("exec", "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", ())
        yield ("exec", "INSERT INTO schema_version VALUES (0)", ())
    for target, script in MIGRATIONS:
        if target > found:
            for statement in script.split(";"):
                if statement.strip():
                    yield ("exec", statement, ())
            yield ("exec", "UPDATE schema_version SET version = %s", (target,))


# -- sessions and contexts (each in the transaction its driver names) -----------------------------------------


def open_session(session_id: str, system: str | None, tools: str | None, format: str | None) -> Op[SessionInfo]:
    t = now()
    yield (
        "exec",
        "INSERT INTO sessions (id, created_at, updated_at, format, system, tools) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
        (session_id, t, t, format, system, tools),
    )
    row = yield ("one", "SELECT system, tools, format FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
    assert row is not None
    changes = {
        k: v
        for k, v, old in (("system", system, row[0]), ("tools", tools, row[1]), ("format", format, row[2]))
        if v is not None and v != old
    }
    if changes:
        sets = sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in changes)
        yield (
            "exec",
            sql.SQL("UPDATE sessions SET {}, updated_at = %s WHERE id = %s").format(sets),
            (*changes.values(), t, session_id),
        )
        row = (changes.get("system", row[0]), changes.get("tools", row[1]), changes.get("format", row[2]))
    ctx = yield from context(session_id)
    return SessionInfo(row[0], row[1], row[2], ctx)


def load_context(session_id: str, head: int | None, after_seq: int | None) -> Op[StoredContext]:
    """(Its own transactions.) With ``after_seq``, the common case, what was appended since is
    one statement (one snapshot, one round trip): the session's pointers and the originals after
    ``after_seq`` when the head is still ``head``; otherwise the whole context in a
    :data:`READ` transaction."""
    if after_seq is not None:
        rows = yield (
            "all",
            "SELECT s.last_seq, s.head, c.upto_seq, c.system, m.id, m.json FROM sessions s "
            "LEFT JOIN compactions c ON c.id = s.head "
            "LEFT JOIN messages m ON m.session = s.id AND m.seq > %s AND s.head IS NOT DISTINCT FROM %s "
            "WHERE s.id = %s ORDER BY m.seq",
            (after_seq, head, session_id),
        )
        if not rows:
            raise StoreError(f"session {session_id!r} was deleted from the store")
        last_seq, stored_head, upto, system = rows[0][:4]
        if stored_head == head:
            found = tuple((int(r[4]), r[5]) for r in rows if r[4] is not None)
            return StoredContext(head, 0 if upto is None else int(upto), system, int(last_seq), found, False, None)
    return (yield from transaction(READ, context(session_id)))


def context(session_id: str) -> Op[StoredContext]:
    """(In a transaction.) The whole context: the head compaction's, then the later originals."""
    row = yield (
        "one",
        "SELECT s.last_seq, s.head, c.upto_seq, c.system FROM sessions s "
        "LEFT JOIN compactions c ON c.id = s.head WHERE s.id = %s",
        (session_id,),
    )
    if row is None:
        raise StoreError(f"session {session_id!r} was deleted from the store")
    last_seq, stored_head = int(row[0]), row[1]
    upto, system = (0, None) if stored_head is None else (int(row[2]), row[3])
    out: list[tuple[int, str]] = []
    if stored_head is not None:
        out.extend(
            (
                yield (
                    "all",
                    "SELECT m.id, m.json FROM context_items c JOIN messages m ON m.id = c.message "
                    "WHERE c.compaction = %s ORDER BY c.pos",
                    (stored_head,),
                )
            )
        )
    out.extend(
        (
            yield (
                "all",
                "SELECT id, json FROM messages WHERE session = %s AND seq > %s ORDER BY seq",
                (session_id, upto),
            )
        )
    )
    return StoredContext(stored_head, upto, system, last_seq, tuple((int(i), j) for i, j in out), True, None)


def append_rows(session_id: str, rows: Sequence[tuple[str, str]]) -> Op[Appended]:
    """(One statement: its own transaction, one round trip.) The update of the session's
    ``last_seq`` takes its row lock (appends to a session are serialised, seqs have no gap) and
    gives the seqs of the inserted rows."""
    t = now()
    if not rows:
        row = yield ("one", "SELECT last_seq, head FROM sessions WHERE id = %s", (session_id,))
        if row is None:
            raise StoreError(f"session {session_id!r} was deleted from the store")
        return Appended((), int(row[0]) + 1, row[1], None)
    found = yield (
        "all",
        "WITH s AS (UPDATE sessions SET last_seq = last_seq + %s, updated_at = %s WHERE id = %s "
        "RETURNING last_seq, head) "
        "INSERT INTO messages (session, seq, kind, role, json, created_at) "
        "SELECT %s, s.last_seq - %s + r.ord, 'original', r.role, r.json, %s "
        "FROM s, unnest(%s::text[], %s::text[]) WITH ORDINALITY AS r(role, json, ord) "
        "RETURNING seq, id, (SELECT head FROM s)",
        (
            len(rows),
            t,
            session_id,
            session_id,
            len(rows),
            t,
            [role for role, _ in rows],
            [text for _, text in rows],
        ),
    )
    if not found:
        raise StoreError(f"session {session_id!r} was deleted from the store")
    found = sorted(found)
    return Appended(tuple(int(r[1]) for r in found), int(found[0][0]), found[0][2], None)


def save_compaction(session_id: str, c: NewCompaction) -> Op[Saved | None]:
    t = c.created_at
    head = yield ("one", "SELECT head FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
    if head is None or head[0] != c.base_head:
        return None
    details = json.dumps(c.details, ensure_ascii=False, separators=(",", ":"))
    row = yield (
        "one",
        "INSERT INTO compactions (session, created_at, upto_seq, strategy, summary, tokens_before, "
        "tokens_after, system, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (session_id, t, c.upto_seq, c.strategy, c.summary, c.tokens_before, c.tokens_after, c.system, details),
    )
    comp = int(row[0])
    derived = yield (
        "ids",
        "INSERT INTO messages (session, kind, role, json, source, compaction, created_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        [(session_id, kind, role, text, source, comp, t) for rid, kind, role, text, source in c.context if rid is None],
    )
    new = iter(derived)
    ids = [rid if rid is not None else next(new) for rid, *_ in c.context]
    yield (
        "many",
        "INSERT INTO context_items (compaction, pos, message) VALUES (%s, %s, %s)",
        [(comp, pos, rid) for pos, rid in enumerate(ids)],
    )
    yield (
        "many",
        "INSERT INTO summary_of (compaction, message, action, detail) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        [(comp, *e) for e in c.record],
    )
    yield ("exec", "UPDATE sessions SET head = %s, updated_at = %s WHERE id = %s", (comp, t, session_id))
    return Saved(comp, tuple(ids), None)


def compactions(session_id: str) -> Op[list[StoredCompaction]]:
    comps = yield (
        "all",
        "SELECT id, created_at, strategy, summary, tokens_before, tokens_after, upto_seq, details "
        "FROM compactions WHERE session = %s ORDER BY id",
        (session_id,),
    )
    links = yield (
        "all",
        "SELECT l.compaction, l.message, l.action, l.detail FROM summary_of l "
        "JOIN compactions c ON c.id = l.compaction WHERE c.session = %s ORDER BY l.compaction, l.message",
        (session_id,),
    )
    found: list[StoredCompaction] = stored_compactions(comps, links)
    return found


def expand(session_id: str, compaction_id: int) -> Op[list[str]]:
    """The walk of :func:`~context_compactor._store.expand_walk`, its questions answered here."""
    found = yield ("one", "SELECT 1 FROM compactions WHERE id = %s AND session = %s", (compaction_id, session_id))
    if found is None:
        raise KeyError(compaction_id)
    steps = expand_walk(compaction_id)
    reply: Any = None
    while True:
        try:
            kind, ids = steps.send(reply)
        except StopIteration as stop:
            return stop.value
        if kind == "rows":
            rows = yield (
                "all",
                "SELECT id, kind, seq, source, compaction, json FROM messages WHERE id = ANY(%s)",
                (ids,),
            )
            reply = {int(r[0]): tuple(r[1:]) for r in rows}
        elif kind == "record":
            reply = [r[0] for r in (yield ("all", "SELECT message FROM summary_of WHERE compaction = ANY(%s)", (ids,)))]
        else:
            reply = [
                r[0]
                for r in (
                    yield (
                        "all",
                        "SELECT message FROM summary_of WHERE compaction = ANY(%s) AND action = ANY(%s)",
                        (ids, sorted(REMOVED)),
                    )
                )
            ]


def history(session_id: str) -> Op[list[tuple[int, str]]]:
    rows = yield (
        "all",
        "SELECT id, json FROM messages WHERE session = %s AND seq IS NOT NULL ORDER BY seq",
        (session_id,),
    )
    return [(int(r[0]), r[1]) for r in rows]


def message(session_id: str, row_id: int) -> Op[str | None]:
    row = yield ("one", "SELECT json FROM messages WHERE session = %s AND id = %s", (session_id, row_id))
    return None if row is None else row[0]


def add_usage(
    session_id: str,
    model: str | None,
    prompt_tokens: int | None,
    usage: str | None,
    head: int | None,
    context_len: int,
    learned: bool,
) -> Op[None]:
    yield (
        "exec",
        "INSERT INTO usage (session, created_at, model, prompt_tokens, usage, head, context_len, learned) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (session_id, now(), model, prompt_tokens, usage, head, context_len, bool(learned)),
    )


def learned_usage(session_id: str, head: int | None, limit: int) -> Op[list[tuple[int, int]]]:
    rows = yield (
        "all",
        "SELECT prompt_tokens, context_len FROM usage WHERE session = %s AND head IS NOT DISTINCT FROM %s "
        "AND learned AND prompt_tokens IS NOT NULL ORDER BY id DESC LIMIT %s",
        (session_id, head, limit),
    )
    return [(int(p), int(n)) for p, n in reversed(rows)]


def session_ids() -> Op[list[str]]:
    return [r[0] for r in (yield ("all", "SELECT id FROM sessions ORDER BY created_at, id", ()))]


def delete_session(session_id: str) -> Op[bool]:
    if (yield ("one", "SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,))) is None:
        return False
    yield ("exec", "UPDATE sessions SET head = NULL WHERE id = %s", (session_id,))
    yield ("exec", "DELETE FROM usage WHERE session = %s", (session_id,))
    for table in ("context_items", "summary_of"):
        yield (
            "exec",
            sql.SQL("DELETE FROM {} WHERE compaction IN {}").format(
                sql.Identifier(table), sql.SQL("(SELECT id FROM compactions WHERE session = %s)")
            ),
            (session_id,),
        )
    yield ("exec", "UPDATE messages SET source = NULL WHERE session = %s", (session_id,))
    yield ("exec", "DELETE FROM messages WHERE session = %s", (session_id,))
    yield ("exec", "DELETE FROM compactions WHERE session = %s", (session_id,))
    yield ("exec", "DELETE FROM sessions WHERE id = %s", (session_id,))
    return True


def pop_original(session_id: str) -> Op[tuple[int, str] | None]:
    row = yield ("one", "SELECT last_seq, head FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
    if row is None:
        raise StoreError(f"session {session_id!r} was deleted from the store")
    last_seq, head = int(row[0]), row[1]
    if last_seq == 0:
        return None
    upto = 0
    if head is not None:
        upto = int((yield ("one", "SELECT upto_seq FROM compactions WHERE id = %s", (head,)))[0])
    if last_seq <= upto:
        raise StoreError(
            f"the newest message of session {session_id!r} (seq {last_seq}) was compacted: "
            "it can no longer be taken back"
        )
    rid, text = yield ("one", "SELECT id, json FROM messages WHERE session = %s AND seq = %s", (session_id, last_seq))
    yield ("exec", "DELETE FROM messages WHERE id = %s", (rid,))
    yield (
        "exec",
        "UPDATE sessions SET last_seq = %s, updated_at = %s WHERE id = %s",
        (last_seq - 1, now(), session_id),
    )
    return int(rid), str(text)


def query(sql_text: str, params: Sequence[Any]) -> Op[list[Any]]:
    """A read query's rows (for inspection and tests)."""
    return (yield ("all", sql_text, params))
