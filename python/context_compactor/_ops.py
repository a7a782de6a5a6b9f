"""The store operations, written once for every SQL store: SQLite (:mod:`context_compactor._sqlite`)
and PostgreSQL, sync and async (:mod:`context_compactor._postgres`,
:mod:`context_compactor._postgres_async`).

Each operation is a generator that yields the statements it needs, ``(mode, query, params)``,
and receives each one's result; it holds every SQL text and every decision: the session's row
lock, the head check of a compaction, the delta rule, the checks of ``pop_original``. A driver
only runs what it is asked on its connection, so the stores cannot drift apart: same statements,
same transactions, same guarantees (:mod:`context_compactor._store` states them).

What differs between the databases is a :class:`Dialect`, a few strings and flags:

============================  ==========================  ======================================
                              SQLite                      PostgreSQL
============================  ==========================  ======================================
write transaction             ``BEGIN IMMEDIATE`` (the    ``BEGIN``, then ``SELECT ... FOR
                              file's write lock at once)  UPDATE`` on the session's row
read snapshot                 ``BEGIN`` (deferred)        ``REPEATABLE READ READ ONLY``
null-safe equality            ``IS``                      ``IS NOT DISTINCT FROM``
insert unless present         ``INSERT OR IGNORE``        ``ON CONFLICT DO NOTHING``
a list of ids                 ``IN (?, ?, ...)`` chunks   ``= ANY(%s)`` (one array)
an append                     a transaction               one statement (``unnest``): one round
                                                          trip, its own transaction
============================  ==========================  ======================================

Statements are written with psycopg's ``%s`` placeholders; the SQLite driver turns them into
``?``. Modes: ``"one"`` (``fetchone()``), ``"all"`` (``fetchall()``), ``"exec"`` (no result),
``"many"`` (``executemany``, no result), ``"id"`` (an ``INSERT`` of one row: its new id; the
driver adds ``RETURNING id`` or reads ``lastrowid``), ``"ids"`` (an ``INSERT`` per parameter
row: the ids in order), ``"marker"`` (the store's :meth:`~context_compactor._store.SessionStore.marker`
as of now; params ``(own_write,)``: the open transaction writes, count it).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

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
)
from context_compactor.errors import StoreError

__all__ = [
    "READ",
    "WRITE",
    "Dialect",
    "Op",
    "SQLStore",
    "add_usage",
    "append_rows",
    "compactions",
    "delete_session",
    "expand",
    "history",
    "learned_usage",
    "load_context",
    "message",
    "open_session",
    "pop_original",
    "query",
    "save_compaction",
    "session_ids",
    "transaction",
]

T = TypeVar("T")
#: An operation: yields ``(mode, query, params)``, receives each result, returns its own.
Op = Generator[tuple[str, Any, Sequence[Any]], Any, T]

#: The transactions an operation runs in: a write (committed at its end, rolled back by the
#: driver on an error) or one consistent read-only snapshot.
WRITE, READ = "write", "read"


@dataclass(frozen=True)
class Dialect:
    """What differs between two SQL databases for the operations (the table in the module's note)."""

    name: str
    #: :data:`WRITE` / :data:`READ` -> the statement that opens that transaction.
    begin: Mapping[str, str]
    #: Appended to the ``SELECT`` of the session's row that a write transaction locks.
    for_update: str
    #: Null-safe equality.
    same: str
    #: ``INSERT`` of a row that may exist: ``(prefix, suffix)``.
    insert_ignore: tuple[str, str]
    #: ``None``: a list of ids is one array parameter (``= ANY(%s)``); else ``IN`` lists of at
    #: most this many parameters.
    max_params: int | None
    #: An append is one statement (PostgreSQL's ``unnest``), else a transaction.
    append_in_one_statement: bool

    def in_ids(self, column: str, ids: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """``(condition, params)`` chunks that together select ``column`` in ``ids``."""
        if self.max_params is None:
            yield f"{column} = ANY(%s)", (list(ids),)
            return
        for k in range(0, len(ids), self.max_params):
            chunk = tuple(ids[k : k + self.max_params])
            yield f"{column} IN ({', '.join(['%s'] * len(chunk))})", chunk


SQLITE = Dialect(
    name="sqlite",
    begin={WRITE: "BEGIN IMMEDIATE", READ: "BEGIN"},
    for_update="",
    same="IS",
    insert_ignore=("INSERT OR IGNORE", ""),
    max_params=500,
    append_in_one_statement=False,
)

POSTGRESQL = Dialect(
    name="postgresql",
    begin={WRITE: "BEGIN", READ: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"},
    for_update=" FOR UPDATE",
    same="IS NOT DISTINCT FROM",
    insert_ignore=("INSERT", " ON CONFLICT DO NOTHING"),
    max_params=None,
    append_in_one_statement=True,
)


def transaction(d: Dialect, txn: str, op: Op[T]) -> Op[T]:
    """``op`` in one transaction: :data:`WRITE` or a :data:`READ` snapshot (one statement opens
    it: a round trip counts, above all on the async path). A driver that sees an error rolls back
    what is open."""
    yield ("exec", d.begin[txn], ())
    result = yield from op
    yield ("exec", "COMMIT", ())
    return result


def _deleted(session_id: str) -> StoreError:
    return StoreError(f"session {session_id!r} was deleted from the store")


# -- sessions and contexts -------------------------------------------------------------------------------


def open_session(
    d: Dialect, session_id: str, system: str | None, tools: str | None, format: str | None
) -> Op[SessionInfo]:
    """Create the session or replace the settings given that differ; the context (one write)."""
    return transaction(d, WRITE, _open_session(d, session_id, system, tools, format))


def _open_session(
    d: Dialect, session_id: str, system: str | None, tools: str | None, format: str | None
) -> Op[SessionInfo]:
    t = now()
    prefix, suffix = d.insert_ignore
    yield (
        "exec",
        f"{prefix} INTO sessions (id, created_at, updated_at, format, system, tools) "
        f"VALUES (%s, %s, %s, %s, %s, %s){suffix}",
        (session_id, t, t, format, system, tools),
    )
    row = yield ("one", f"SELECT system, tools, format FROM sessions WHERE id = %s{d.for_update}", (session_id,))
    if row is None:
        raise _deleted(session_id)
    changes = {
        k: v
        for k, v, old in (("system", system, row[0]), ("tools", tools, row[1]), ("format", format, row[2]))
        if v is not None and v != old
    }
    if changes:
        sets = ", ".join(f"{k} = %s" for k in changes)  # k: one of three fixed column names
        yield ("exec", f"UPDATE sessions SET {sets}, updated_at = %s WHERE id = %s", (*changes.values(), t, session_id))
        row = (changes.get("system", row[0]), changes.get("tools", row[1]), changes.get("format", row[2]))
    ctx = yield from _context(session_id, own_write=True)
    return SessionInfo(row[0], row[1], row[2], ctx)


def load_context(d: Dialect, session_id: str, head: int | None, after_seq: int | None) -> Op[StoredContext]:
    """With ``after_seq``, the common case, what was appended since is one statement (one
    snapshot, one round trip): the session's pointers and the originals after ``after_seq`` when
    the head is still ``head``; otherwise the whole context in a :data:`READ` transaction."""
    if after_seq is not None:
        # The marker before the read: a commit in between only makes the next read a wasted one.
        marker = yield ("marker", None, (False,))
        rows = yield (
            "all",
            "SELECT s.last_seq, s.head, c.upto_seq, c.system, m.id, m.json FROM sessions s "
            "LEFT JOIN compactions c ON c.id = s.head "
            f"LEFT JOIN messages m ON m.session = s.id AND m.seq > %s AND s.head {d.same} %s "
            "WHERE s.id = %s ORDER BY m.seq",
            (after_seq, head, session_id),
        )
        if not rows:
            raise _deleted(session_id)
        last_seq, stored_head, upto, system = rows[0][:4]
        if stored_head == head:
            found = tuple((int(r[4]), r[5]) for r in rows if r[4] is not None)
            return StoredContext(head, 0 if upto is None else int(upto), system, int(last_seq), found, False, marker)
    return (yield from transaction(d, READ, _context(session_id, own_write=False)))


def _context(session_id: str, *, own_write: bool) -> Op[StoredContext]:
    """(In a transaction.) The whole context: the head compaction's, then the later originals
    (the delta rule)."""
    row = yield (
        "one",
        "SELECT s.last_seq, s.head, c.upto_seq, c.system FROM sessions s "
        "LEFT JOIN compactions c ON c.id = s.head WHERE s.id = %s",
        (session_id,),
    )
    if row is None:
        raise _deleted(session_id)
    marker = yield ("marker", None, (own_write,))
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
    rows = tuple((int(i), j) for i, j in out)
    return StoredContext(None if stored_head is None else int(stored_head), upto, system, last_seq, rows, True, marker)


def append_rows(d: Dialect, session_id: str, rows: Sequence[tuple[str | None, str]]) -> Op[Appended]:
    """Append originals with the next seqs. The session's row is locked first (appends to a
    session are serialised, seqs have no gap); appends to other sessions never wait."""
    t = now()
    if not rows:
        row = yield ("one", "SELECT last_seq, head FROM sessions WHERE id = %s", (session_id,))
        if row is None:
            raise _deleted(session_id)
        return Appended((), int(row[0]) + 1, row[1], None)
    if not d.append_in_one_statement:
        return (yield from transaction(d, WRITE, _append(d, session_id, rows, t)))
    # One statement (its own transaction, one round trip): the update of ``last_seq`` takes the
    # session's row lock and gives the seqs of the inserted rows.
    found = yield (
        "all",
        "WITH s AS (UPDATE sessions SET last_seq = last_seq + %s, updated_at = %s WHERE id = %s "
        "RETURNING last_seq, head) "
        "INSERT INTO messages (session, seq, kind, role, json, created_at) "
        "SELECT %s, s.last_seq - %s + r.ord, 'original', r.role, r.json, %s "
        "FROM s, unnest(%s::text[], %s::text[]) WITH ORDINALITY AS r(role, json, ord) "
        "RETURNING seq, id, (SELECT head FROM s)",
        (len(rows), t, session_id, session_id, len(rows), t, [r for r, _ in rows], [j for _, j in rows]),
    )
    if not found:
        raise _deleted(session_id)
    found = sorted(found)
    return Appended(tuple(int(r[1]) for r in found), int(found[0][0]), found[0][2], None)


def _append(d: Dialect, session_id: str, rows: Sequence[tuple[str | None, str]], t: float) -> Op[Appended]:
    row = yield ("one", f"SELECT last_seq, head FROM sessions WHERE id = %s{d.for_update}", (session_id,))
    if row is None:
        raise _deleted(session_id)
    seq, head = int(row[0]), row[1]
    ids = yield (
        "ids",
        "INSERT INTO messages (session, seq, kind, role, json, created_at) VALUES (%s, %s, 'original', %s, %s, %s)",
        [(session_id, seq + k, role, text, t) for k, (role, text) in enumerate(rows, 1)],
    )
    yield ("exec", "UPDATE sessions SET last_seq = %s, updated_at = %s WHERE id = %s", (seq + len(rows), t, session_id))
    marker = yield ("marker", None, (True,))
    return Appended(tuple(ids), seq + 1, head, marker)


def save_compaction(d: Dialect, session_id: str, c: NewCompaction) -> Op[Saved | None]:
    """Save a compaction and make it the head, in one write, only when the head is still the one
    it was computed from (else ``None``, nothing written)."""
    return transaction(d, WRITE, _save_compaction(d, session_id, c))


def _save_compaction(d: Dialect, session_id: str, c: NewCompaction) -> Op[Saved | None]:
    t = c.created_at
    head = yield ("one", f"SELECT head FROM sessions WHERE id = %s{d.for_update}", (session_id,))
    if head is None or head[0] != c.base_head:
        return None
    details = json.dumps(c.details, ensure_ascii=False, separators=(",", ":"))
    comp = yield (
        "id",
        "INSERT INTO compactions (session, created_at, upto_seq, strategy, summary, tokens_before, "
        "tokens_after, system, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (session_id, t, c.upto_seq, c.strategy, c.summary, c.tokens_before, c.tokens_after, c.system, details),
    )
    derived = yield (
        "ids",
        "INSERT INTO messages (session, kind, role, json, source, compaction, created_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
        [(session_id, kind, role, text, source, comp, t) for rid, kind, role, text, source in c.context if rid is None],
    )
    new = iter(derived)
    ids = [rid if rid is not None else next(new) for rid, *_ in c.context]
    yield (
        "many",
        "INSERT INTO context_items (compaction, pos, message) VALUES (%s, %s, %s)",
        [(comp, pos, rid) for pos, rid in enumerate(ids)],
    )
    prefix, suffix = d.insert_ignore
    yield (
        "many",
        f"{prefix} INTO summary_of (compaction, message, action, detail) VALUES (%s, %s, %s, %s){suffix}",
        [(comp, *e) for e in c.record],
    )
    yield ("exec", "UPDATE sessions SET head = %s, updated_at = %s WHERE id = %s", (comp, t, session_id))
    marker = yield ("marker", None, (True,))
    return Saved(int(comp), tuple(int(i) for i in ids), marker)


def compactions(d: Dialect, session_id: str) -> Op[list[StoredCompaction]]:
    return transaction(d, READ, _compactions(session_id))


def _compactions(session_id: str) -> Op[list[StoredCompaction]]:
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
    return stored_compactions(comps, links)


def expand(d: Dialect, session_id: str, compaction_id: int) -> Op[list[str]]:
    """The walk of :func:`~context_compactor._store.expand_walk`, its questions answered here."""
    return transaction(d, READ, _expand(d, session_id, compaction_id))


def _expand(d: Dialect, session_id: str, compaction_id: int) -> Op[list[str]]:
    found = yield ("one", "SELECT 1 FROM compactions WHERE id = %s AND session = %s", (compaction_id, session_id))
    if found is None:
        raise KeyError(compaction_id)
    steps = expand_walk(compaction_id)
    reply: Any = None
    while True:
        try:
            kind, ids = steps.send(reply)
        except StopIteration as stop:
            originals: list[str] = stop.value
            return originals
        if kind == "rows":
            rows: dict[int, tuple[Any, ...]] = {}
            for cond, params in d.in_ids("id", ids):
                sql = f"SELECT id, kind, seq, source, compaction, json FROM messages WHERE {cond}"
                rows.update((int(r[0]), tuple(r[1:])) for r in (yield ("all", sql, params)))
            reply = rows
            continue
        removed = "" if kind == "record" else f" AND action IN ({', '.join(['%s'] * len(REMOVED))})"
        extra = () if kind == "record" else tuple(sorted(REMOVED))
        messages: list[int] = []
        for cond, params in d.in_ids("compaction", ids):
            sql = f"SELECT message FROM summary_of WHERE {cond}{removed}"
            messages.extend(r[0] for r in (yield ("all", sql, (*params, *extra))))
        reply = messages


def history(d: Dialect, session_id: str) -> Op[list[tuple[int, str]]]:
    sql = "SELECT id, json FROM messages WHERE session = %s AND seq IS NOT NULL ORDER BY seq"
    rows = yield from query(sql, (session_id,))
    return [(int(r[0]), r[1]) for r in rows]


def message(d: Dialect, session_id: str, row_id: int) -> Op[str | None]:
    rows = yield from query("SELECT json FROM messages WHERE session = %s AND id = %s", (session_id, row_id))
    return None if not rows else str(rows[0][0])


# -- usage and sessions ----------------------------------------------------------------------------------


def add_usage(
    d: Dialect,
    session_id: str,
    model: str | None,
    prompt_tokens: int | None,
    usage: str | None,
    head: int | None,
    context_len: int,
    learned: bool,
) -> Op[None]:
    """One statement: its own transaction."""
    yield (
        "exec",
        "INSERT INTO usage (session, created_at, model, prompt_tokens, usage, head, context_len, learned) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (session_id, now(), model, prompt_tokens, usage, head, context_len, bool(learned)),
    )


def learned_usage(d: Dialect, session_id: str, head: int | None, limit: int) -> Op[list[tuple[int, int]]]:
    rows = yield from query(
        f"SELECT prompt_tokens, context_len FROM usage WHERE session = %s AND head {d.same} %s "
        "AND learned AND prompt_tokens IS NOT NULL ORDER BY id DESC LIMIT %s",
        (session_id, head, limit),
    )
    return [(int(p), int(n)) for p, n in reversed(rows)]


def session_ids(d: Dialect) -> Op[list[str]]:
    return [str(r[0]) for r in (yield from query("SELECT id FROM sessions ORDER BY created_at, id", ()))]


def delete_session(d: Dialect, session_id: str) -> Op[bool]:
    """Delete a session and everything it holds, in one write; whether it existed."""
    return transaction(d, WRITE, _delete_session(d, session_id))


def _delete_session(d: Dialect, session_id: str) -> Op[bool]:
    if (yield ("one", f"SELECT 1 FROM sessions WHERE id = %s{d.for_update}", (session_id,))) is None:
        return False
    yield ("exec", "UPDATE sessions SET head = NULL WHERE id = %s", (session_id,))
    yield ("exec", "DELETE FROM usage WHERE session = %s", (session_id,))
    for table in ("context_items", "summary_of"):
        yield (
            "exec",
            f"DELETE FROM {table} WHERE compaction IN (SELECT id FROM compactions WHERE session = %s)",
            (session_id,),
        )
    # Edited copies point at their source row: unlink them before the rows go.
    yield ("exec", "UPDATE messages SET source = NULL WHERE session = %s", (session_id,))
    for table, column in (("messages", "session"), ("compactions", "session"), ("sessions", "id")):
        yield ("exec", f"DELETE FROM {table} WHERE {column} = %s", (session_id,))
    return True


def pop_original(d: Dialect, session_id: str) -> Op[tuple[int, str] | None]:
    """Delete the newest original and return it, in one write, when no compaction saw it."""
    return transaction(d, WRITE, _pop_original(d, session_id))


def _pop_original(d: Dialect, session_id: str) -> Op[tuple[int, str] | None]:
    row = yield ("one", f"SELECT last_seq, head FROM sessions WHERE id = %s{d.for_update}", (session_id,))
    if row is None:
        raise _deleted(session_id)
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


def session_meta(d: Dialect, session_id: str) -> Op[str | None]:
    """What the application keeps with the session (JSON text), ``None`` when nothing is kept."""
    row = yield ("one", "SELECT meta FROM sessions WHERE id = %s", (session_id,))
    if row is None:
        raise _deleted(session_id)
    return None if row[0] is None else str(row[0])


def set_session_meta(d: Dialect, session_id: str, meta: str | None) -> Op[None]:
    """Replace what the application keeps with the session, in one write."""
    return transaction(d, WRITE, _set_session_meta(d, session_id, meta))


def _set_session_meta(d: Dialect, session_id: str, meta: str | None) -> Op[None]:
    if (yield ("one", f"SELECT 1 FROM sessions WHERE id = %s{d.for_update}", (session_id,))) is None:
        raise _deleted(session_id)
    yield ("exec", "UPDATE sessions SET meta = %s, updated_at = %s WHERE id = %s", (meta, now(), session_id))


def query(sql: str, params: Sequence[Any]) -> Op[list[Any]]:
    """A read query's rows (one statement)."""
    return list((yield ("all", sql, params)))


# -- a sync store over these operations --------------------------------------------------------------------


class SQLStore(SessionStore):
    """A sync :class:`~context_compactor._store.SessionStore` whose operations are this module's,
    in :attr:`dialect`: a subclass gives the dialect and :meth:`_do`, which runs an operation on
    its connection (the transactions are the operation's own) and turns the driver's errors into
    :class:`StoreError`; ``write`` says the operation writes (SQLite counts its own commits)."""

    dialect: Dialect

    @abc.abstractmethod
    def _do(self, what: str, op: Op[T], *, write: bool = False) -> T: ...

    def open_session(
        self, session_id: str, *, system: str | None, tools: str | None, format: str | None
    ) -> SessionInfo:
        return self._do("open a session", open_session(self.dialect, session_id, system, tools, format), write=True)

    def load_context(self, session_id: str, *, head: int | None = None, after_seq: int | None = None) -> StoredContext:
        return self._do("read", load_context(self.dialect, session_id, head, after_seq))

    def append_rows(self, session_id: str, rows: Sequence[tuple[str | None, str]]) -> Appended:
        return self._do("append", append_rows(self.dialect, session_id, rows), write=True)

    def save_compaction(self, session_id: str, compaction: NewCompaction) -> Saved | None:
        return self._do("save a compaction", save_compaction(self.dialect, session_id, compaction), write=True)

    def compactions(self, session_id: str) -> list[StoredCompaction]:
        return self._do("read", compactions(self.dialect, session_id))

    def expand(self, session_id: str, compaction_id: int) -> list[str]:
        return self._do("read", expand(self.dialect, session_id, compaction_id))

    def history(self, session_id: str) -> list[tuple[int, str]]:
        return self._do("read", history(self.dialect, session_id))

    def message(self, session_id: str, row_id: int) -> str | None:
        return self._do("read", message(self.dialect, session_id, row_id))

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
        op = add_usage(self.dialect, session_id, model, prompt_tokens, usage, head, context_len, learned)
        self._do("record usage", op, write=True)

    def learned_usage(self, session_id: str, head: int | None, limit: int) -> list[tuple[int, int]]:
        return self._do("read", learned_usage(self.dialect, session_id, head, limit))

    def session_ids(self) -> list[str]:
        return self._do("read", session_ids(self.dialect))

    def delete_session(self, session_id: str) -> bool:
        return self._do("delete a session", delete_session(self.dialect, session_id), write=True)

    def pop_original(self, session_id: str) -> tuple[int, str] | None:
        return self._do("pop an original", pop_original(self.dialect, session_id), write=True)

    def session_meta(self, session_id: str) -> str | None:
        return self._do("read", session_meta(self.dialect, session_id))

    def set_session_meta(self, session_id: str, meta: str | None) -> None:
        self._do("write the session's meta", set_session_meta(self.dialect, session_id, meta), write=True)
