"""The PostgreSQL store's own parts, shared by the sync
:class:`~context_compactor._postgres.PostgresStore` (``psycopg.Connection``) and the async
:class:`~context_compactor._postgres_async.AsyncPostgresStore` (``psycopg.AsyncConnection``): the
schema and its migrations, the connection's settings, the errors. The operations themselves are
:mod:`context_compactor._ops`' (every SQL store runs the same ones), in its
:data:`~context_compactor._ops.POSTGRESQL` dialect; these are generators in the same shape.
"""

from __future__ import annotations

import re
import select
from typing import Any

from context_compactor._ops import Op
from context_compactor.errors import StoreError

try:
    import psycopg
    import psycopg_pool
    from psycopg import sql
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError(
        "the PostgreSQL store needs psycopg 3 and psycopg-pool: pip install 'context-compactor[postgres]'"
    ) from e

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

_V3 = """
ALTER TABLE sessions ADD COLUMN meta TEXT
"""

#: ``(version, script)``: the script that brings a store from ``version - 1`` to ``version``
#: (the same versions as the SQLite store's).
MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2), (3, _V3))
#: The schema version this package writes.
SCHEMA_VERSION = MIGRATIONS[-1][0]

#: The advisory lock key migrations hold (an arbitrary constant: "ccmigr" in ASCII).
_MIGRATION_LOCK = 0x63636D69677200

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


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


def dropped(conn: Any) -> bool:
    """Whether the server dropped ``conn`` (sync or async, idle in a pool) since its last use: it
    is closed, or its socket has something to read, which an idle connection only has when the
    server sent its farewell (a restart, ``pg_terminate_backend``) or closed it. No round trip;
    a false alarm costs one new connection."""
    if conn.closed or conn.pgconn.status != psycopg.pq.ConnStatus.OK:
        return True
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


def pool_error(e: Exception, what: str, timeout: float) -> StoreError:
    """A pool's error (no connection in time, the pool closed) as a :class:`StoreError`."""
    if isinstance(e, psycopg_pool.PoolClosed):
        return StoreError("the session store is closed")
    return StoreError(
        f"{what}: no connection to the PostgreSQL store within {timeout:g} s "
        f"(the server is down or every connection of the pool is busy): {e}"
    )


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
    """(In a write transaction.) Bring the schema to :data:`SCHEMA_VERSION` under a
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
