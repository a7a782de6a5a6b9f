"""The store's named operations (`SessionStore`), which any backend implements, and the delta rule:
a compaction computed on a snapshot applies over the rows appended since, which stay verbatim."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from context_compactor import ContextCompactor, SessionStore, StoreError, validate_messages
from context_compactor._sqlite import SQLiteStore
from context_compactor.session import Session
from context_compactor.stores import NewCompaction


def test_session_store_opens_the_backend_its_argument_names(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    assert isinstance(store, SQLiteStore) and isinstance(store, SessionStore)
    store.close()
    with pytest.raises(StoreError, match="no store for 'mysql'"):
        SessionStore("mysql://localhost/db")
    with pytest.raises(StoreError, match="expected a path"):
        SessionStore(42)  # type: ignore[arg-type]


def test_operations_round_trip(store_target: str) -> None:
    store = SessionStore(store_target)
    info = store.open_session("a", system='"Be brief."', tools=None, format="openai")
    assert info.system == '"Be brief."' and info.context.rows == () and info.context.head is None
    done = store.append_rows(
        "a", [("user", '{"role":"user","content":"one"}'), ("assistant", '{"role":"assistant","content":"two"}')]
    )
    assert done.first_seq == 1 and len(done.ids) == 2 and done.head is None
    ctx = store.load_context("a")
    assert ctx.complete and [r[0] for r in ctx.rows] == list(done.ids) and ctx.last_seq == 2
    # A compaction computed on the first message only: the second follows it verbatim (the delta rule).
    new = NewCompaction(
        base_head=None,
        upto_seq=1,
        strategy="summary",
        summary="S",
        tokens_before=10,
        tokens_after=5,
        system=None,
        details={},
        context=((None, "summary", "user", '{"role":"user","content":"S"}', None),),
        record=((done.ids[0], "summarized", ""),),
    )
    saved = store.save_compaction("a", new)
    assert saved is not None
    ctx = store.load_context("a")
    assert ctx.head == saved.id and [t for _, t in ctx.rows] == [
        '{"role":"user","content":"S"}',
        '{"role":"assistant","content":"two"}',
    ]
    # Conditional: computed on a head that is no longer the head, nothing is written.
    assert store.save_compaction("a", new) is None
    assert [c.id for c in store.compactions("a")] == [saved.id]
    assert store.expand("a", saved.id) == ['{"role":"user","content":"one"}']
    with pytest.raises(KeyError):
        store.expand("a", saved.id + 1)
    # Only what was appended after a known point, when the head did not move.
    later = store.append_rows("a", [("user", '{"role":"user","content":"three"}')])
    part = store.load_context("a", head=saved.id, after_seq=2)
    assert not part.complete and [r[0] for r in part.rows] == list(later.ids)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load_context("a")


def test_a_compaction_applies_over_appends_made_while_it_ran(store_target: str) -> None:
    """Another connection appends while this one's summarizer runs: the delta stays verbatim."""
    path = store_target
    other = Session("d", compactor=ContextCompactor(), store=path)

    def summarize(request: object) -> str:
        # The agent (another process, here another connection) keeps going meanwhile.
        other.append({"role": "assistant", "content": "appended while summarising"})
        return "<summary>Earlier work on /srv/app/main.py.</summary>"

    s = Session(
        "d", compactor=ContextCompactor(max_context_tokens=4000, reserve_tokens=400, summarizer=summarize), store=path
    )
    s.append({"role": "user", "content": "Fix /srv/app/main.py"})
    for k in range(12):
        s.append({"role": "assistant", "content": f"step {k} " + "words " * 60})
        s.append({"role": "user", "content": f"ok {k}"})
    result = s.prepare(force=True)
    assert result is not None and result.summary_source == "llm"
    ctx = s.context()
    assert ctx[-1] == {"role": "assistant", "content": "appended while summarising"}
    assert s.compactions()[-1].upto_seq == 25 and len(s) == 26
    assert validate_messages(ctx, format="openai") == []
    assert other.context() == ctx
    s.close()
    other.close()


def test_postgres_lock_timeout_newer_schema_and_bad_urls(postgres_server: Any) -> None:
    """PostgreSQL only: a session row locked by another worker past `timeout` raises StoreError
    (never waits forever); a schema written by a newer version is refused; a dead server is a
    StoreError naming the cause."""
    psycopg = pytest.importorskip("psycopg")
    url = postgres_server.new_database()
    store = SessionStore(url, timeout=0.5)
    store.open_session("a", system=None, tools=None, format="openai")
    with psycopg.connect(url) as other:
        other.execute("SELECT 1 FROM context_compactor.sessions WHERE id = 'a' FOR UPDATE")
        t0 = time.monotonic()
        with pytest.raises(StoreError, match="locked by another connection"):
            store.append_rows("a", [("user", '{"role":"user","content":"x"}')])
        assert time.monotonic() - t0 < 5
    assert store.append_rows("a", [("user", '{"role":"user","content":"x"}')]).first_seq == 1
    store.close()
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("UPDATE context_compactor.schema_version SET version = 99")
    with pytest.raises(StoreError, match="newer than this package"):
        SessionStore(url)
    with pytest.raises(StoreError, match="cannot connect"):
        SessionStore("postgresql://postgres@127.0.0.1:1/none", timeout=1)


def test_pop_and_clear_take_back_only_what_no_compaction_took(store_target: str) -> None:
    """Session.pop() (the Agents SDK's pop_item) removes the newest uncompacted original; after a
    compaction saw it, it refuses; clear() empties the session, which stays usable."""
    compactor = ContextCompactor(max_context_tokens=2000, keep_recent_messages=1)
    with Session("pop", compactor=compactor, store=store_target, system="sys") as s:
        assert s.pop() is None
        s.extend([{"role": "user", "content": "任务: fix src/app.py"}, {"role": "assistant", "content": "ok"}])
        assert s.pop() == {"role": "assistant", "content": "ok"}
        assert len(s) == 1 and [m["content"] for m in s.context()] == ["任务: fix src/app.py"]
        for k in range(4):
            s.extend(
                [{"role": "assistant", "content": f"step {k} " + "read it " * 120}, {"role": "user", "content": "go"}]
            )
        assert len(s) == 9
        s.prepare(force=True)
        assert s.compactions(), "a forced compaction of an over-threshold context"
        with pytest.raises(StoreError, match="compacted"):
            s.pop()
        s.append({"role": "assistant", "content": "later"})
        assert s.pop() == {"role": "assistant", "content": "later"}
        s.clear()
        assert s.context() == [] and len(s) == 0 and s.compactions() == []
        s.append({"role": "user", "content": "again"})
    with Session("pop", compactor=compactor, store=store_target) as again:
        assert again.context() == [{"role": "user", "content": "again"}]
        assert again.system == "sys"


def test_postgres_reconnects_after_the_server_drops_its_connections(postgres_server: Any) -> None:
    """A restarted server (or terminated backends) costs at most the calls in flight: they raise
    a StoreError naming the cause, and the next call, sync or async, reconnects on its own."""
    import asyncio
    import threading

    psycopg = pytest.importorskip("psycopg")
    url = postgres_server.new_database()
    s = Session("r", compactor=ContextCompactor(), store=url, timeout=5)
    s.append({"role": "user", "content": "one"})

    # A call in flight when its connection is dropped: an append waiting for the session's row lock.
    failed: list[BaseException] = []
    with psycopg.connect(url) as locker, psycopg.connect(url, autocommit=True) as admin:
        locker.execute("SELECT 1 FROM context_compactor.sessions WHERE id = 'r' FOR UPDATE")
        t = threading.Thread(target=lambda: failed.extend(_raised(s.append, {"role": "user", "content": "lost"})))
        t.start()
        deadline = time.monotonic() + 30
        while not admin.execute("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchall():
            assert time.monotonic() < deadline, "the append never waited for the row lock"
            time.sleep(0.01)
        killed = [
            pid
            for (pid,) in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid NOT IN (pg_backend_pid(), %s)",
                (locker.info.backend_pid,),
            ).fetchall()
        ]
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (killed,))
        t.join(10)
        # The terminated backends are gone (their farewell was sent). Only those: the store's pool
        # may already have opened a new connection, so counting every backend could wait forever.
        deadline = time.monotonic() + 30
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (killed,)).fetchall():
            assert time.monotonic() < deadline, f"terminated backends {killed} still listed after 30 s"
            time.sleep(0.01)
    assert len(failed) == 1 and isinstance(failed[0], StoreError)
    assert "terminating connection" in str(failed[0])
    # The next call reconnects: nothing was lost, nothing doubled.
    s.append({"role": "user", "content": "two"})
    assert [m["content"] for m in s.context()] == ["one", "two"]

    async def after_restart() -> list[str]:
        a = await Session.aopen("r", compactor=ContextCompactor(), store=url, timeout=5)
        await a.aappend({"role": "user", "content": "three"})
        t0 = time.monotonic()
        postgres_server.restart()
        restarted.append(time.monotonic() - t0)
        t0 = time.monotonic()
        await a.aappend({"role": "user", "content": "four"})  # the async pool reconnects
        restarted.append(time.monotonic() - t0)
        ctx = await a.acontext()
        await a.aclose()
        return [m["content"] for m in ctx]

    restarted: list[float] = []
    assert asyncio.run(after_restart()) == ["one", "two", "three", "four"]
    t0 = time.monotonic()
    s.append({"role": "user", "content": "five"})  # the sync pool reconnects too
    restarted.append(time.monotonic() - t0)
    # Measured: the restart ~0.3 s; the first call after it, on a new connection, ~0.05 s.
    assert max(restarted[1:]) < 5
    assert len(s) == 5 and s.context()[-1]["content"] == "five"
    s.close()


def _raised(fn: Any, *args: Any) -> list[BaseException]:
    try:
        fn(*args)
    except BaseException as e:
        return [e]
    return []


def test_session_meta_is_kept_with_the_session_and_deleted_with_it(store_target: str) -> None:
    store = SessionStore(store_target)
    store.open_session("m", system=None, tools=None, format=None)
    assert store.session_meta("m") is None
    meta = '{"format": "responses", "config": {"max_context_tokens": 5000}, "summarizer": "摘要"}'
    store.set_session_meta("m", meta)
    store.close()
    store = SessionStore(store_target)  # another connection: it was committed
    assert store.session_meta("m") == meta
    # Reopening the session leaves it; deleting the session deletes it.
    store.open_session("m", system='"x"', tools=None, format="openai")
    assert store.session_meta("m") == meta
    assert store.delete_session("m")
    store.open_session("m", system=None, tools=None, format=None)
    assert store.session_meta("m") is None
    with pytest.raises(StoreError, match="'gone'"):
        store.set_session_meta("gone", "{}")
    with pytest.raises(StoreError, match="'gone'"):
        store.session_meta("gone")
    store.delete_session("m")
    store.close()
