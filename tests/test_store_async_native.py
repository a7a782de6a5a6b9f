"""The native async store (:mod:`context_compactor._postgres_async`, psycopg's ``AsyncConnection``)
and the Session's async methods on it, against the real PostgreSQL server; the tests that are not
PostgreSQL-only run once per backend (SQLite keeps the worker-thread path).

- The async store's operations give what the sync store reads back (they are the same code,
  :mod:`context_compactor._pg_ops`); its timeouts, schema checks and loop binding fail with a
  clear :class:`StoreError`.
- On PostgreSQL the async methods run no worker thread (``asyncio.to_thread`` is made to fail),
  and ``Session.aopen(url)`` never opens the sync connection.
- A Session works across event loops (two ``asyncio.run`` calls, a loop in another thread).
- Asyncio tasks in two processes append to and compact one session: nothing lost or duplicated,
  each task's messages in order, every context valid, the delta rule kept.
- ``aprepare()`` cancelled at many moments (in the summarizer, waiting for the session's lock,
  saving) leaves the store whole and the Session in step with it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from context_compactor import ContextCompactor, SessionStore, StoreError, validate_messages
from context_compactor.session import Session
from context_compactor.stores import NewCompaction
from test_store_async import lock_held
from test_store_durability import integrity


def tool_round(tag: str, k: int) -> list[dict[str, Any]]:
    """An assistant tool call and its result: appended together (one ``aextend``), so a context
    that split them would be invalid."""
    cid = f"call_{tag}_{k}"
    return [
        {
            "role": "assistant",
            "content": f"{tag}-{k} 读取 src/app.py",
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": cid, "content": f"{tag}-{k} output " + "行 line " * 30},
    ]


async def summarize(request: object) -> str:
    await asyncio.sleep(0.005)
    return "<summary>Earlier: reads of src/app.py and 配置 config.yaml.</summary>"


def compactor(**kw: Any) -> ContextCompactor:
    return ContextCompactor(max_context_tokens=3000, reserve_tokens=300, summarizer=summarize, **kw)


def covered(s: Session) -> set[str]:
    """The content of every original the model still sees: in the context, or in a compaction's
    originals (what a summary stands for)."""
    seen = {json.dumps(m, sort_keys=True) for m in s.context()}
    for rec in s.compactions():
        seen.update(json.dumps(m, sort_keys=True) for m in s.expand(rec.id))
    return seen


# -- the async store itself ----------------------------------------------------------------------------------


def test_async_store_operations_read_back_by_the_sync_store(postgres_server: Any) -> None:
    from context_compactor._postgres_async import AsyncPostgresStore

    url = postgres_server.new_database()

    async def main() -> dict[str, Any]:
        async with await AsyncPostgresStore.connect(url) as a:
            info = await a.open_session("a", system='"简短"', tools=None, format="openai")
            assert info.context.rows == () and info.system == '"简短"'
            done = await a.append_rows(
                "a", [("user", '{"role":"user","content":"一"}'), ("assistant", '{"role":"assistant","content":"two"}')]
            )
            assert done.first_seq == 1 and len(done.ids) == 2
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
            saved = await a.save_compaction("a", new)
            assert saved is not None and await a.save_compaction("a", new) is None  # the head moved
            later = await a.append_rows("a", [("user", '{"role":"user","content":"three"}')])
            await a.add_usage("a", model="m", prompt_tokens=42, usage=None, head=saved.id, context_len=3, learned=True)
            out = {
                "context": await a.load_context("a"),
                "delta": await a.load_context("a", head=saved.id, after_seq=2),
                "compactions": await a.compactions("a"),
                "expand": await a.expand("a", saved.id),
                "history": await a.history("a"),
                "message": await a.message("a", later.ids[0]),
                "usage": await a.learned_usage("a", saved.id, 4),
                "ids": await a.session_ids(),
            }
            with pytest.raises(KeyError):
                await a.expand("a", saved.id + 100)
            assert await a.pop_original("a") == (later.ids[0], '{"role":"user","content":"three"}')
            assert await a.pop_original("a") == (done.ids[1], '{"role":"assistant","content":"two"}')
            with pytest.raises(StoreError, match="compacted"):
                await a.pop_original("a")
            await a.open_session("b", system=None, tools=None, format=None)
            assert await a.delete_session("b") and not await a.delete_session("b")
            return out

    got = asyncio.run(main())
    assert [t for _, t in got["context"].rows] == [
        '{"role":"user","content":"S"}',
        '{"role":"assistant","content":"two"}',
        '{"role":"user","content":"three"}',
    ]
    assert not got["delta"].complete and [t for _, t in got["delta"].rows] == ['{"role":"user","content":"three"}']
    assert got["expand"] == ['{"role":"user","content":"一"}']
    assert got["usage"] == [(42, 3)] and got["ids"] == ["a"]
    with SessionStore(url) as sync:
        assert sync.compactions("a") == got["compactions"]
        assert sync.expand("a", got["compactions"][0].id) == got["expand"]
        assert sync.history("a") == got["history"][:1]  # the others were popped
        assert sync.load_context("a").rows == got["context"].rows[:1]


def test_async_store_timeouts_schema_and_loops_fail_clearly(postgres_server: Any) -> None:
    import psycopg

    from context_compactor._postgres_async import AsyncPostgresStore

    url = postgres_server.new_database()

    async def first() -> AsyncPostgresStore:
        a = await AsyncPostgresStore.connect(url, timeout=0.5)
        await a.open_session("a", system=None, tools=None, format="openai")
        with psycopg.connect(url) as other:
            other.execute("SELECT 1 FROM context_compactor.sessions WHERE id = 'a' FOR UPDATE")
            t0 = time.monotonic()
            with pytest.raises(StoreError, match="locked by another connection"):
                await a.append_rows("a", [("user", '{"role":"user","content":"x"}')])
            assert time.monotonic() - t0 < 5
        assert (await a.append_rows("a", [("user", '{"role":"user","content":"x"}')])).first_seq == 1
        return a

    a = asyncio.run(first())

    async def second() -> None:
        with pytest.raises(StoreError, match="another event loop"):
            await a.history("a")
        await a.aclose()  # from another loop: closed without awaiting the old loop
        with pytest.raises(StoreError, match="closed"):
            await a.history("a")

    asyncio.run(second())
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("UPDATE context_compactor.schema_version SET version = 99")

    async def third() -> None:
        with pytest.raises(StoreError, match="newer than this package"):
            await AsyncPostgresStore.connect(url)
        with pytest.raises(StoreError, match="cannot connect"):
            await AsyncPostgresStore.connect("postgresql://postgres@127.0.0.1:1/none", timeout=1)
        with pytest.raises(StoreError, match="newer than this package"):
            await SessionStore.aopen(url)

    asyncio.run(third())


# -- the Session on it -----------------------------------------------------------------------------------------


def test_postgres_async_methods_run_no_worker_thread(postgres_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every async method of a PostgreSQL Session awaits the async connection: a thread hop
    would fail here. ``aopen(url)`` never opens the sync connection."""
    url = postgres_server.new_database()

    def no_thread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a worker thread was used on the native path")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)

    async def main() -> None:
        async with await Session.aopen("native", compactor=compactor(), store=url, system="你是编程助手。") as s:
            assert s.store._pool is None  # type: ignore[attr-defined]  # no sync pool opened
            await s.aappend({"role": "user", "content": "修复 src/app.py"})
            for k in range(20):
                await s.aextend(tool_round("n", k))
            assert (await s.acheck()).should_compact
            result = await s.aprepare()
            assert result is not None and result.compacted  # tool output cleared
            result = await s.aprepare(force=True)
            assert result is not None and result.summary_source == "llm"
            ctx = await s.acontext()
            assert validate_messages(ctx, format="openai") == []
            recs = await s.acompactions()
            assert len(recs) == 2 and len(await s.aexpand(recs[1].id)) > 10
            assert len(await s.ahistory()) == 41
            assert await s.arecord_usage(len(ctx) * 50 + 900, model="m") in (True, False)
            assert s.store._pool is None  # type: ignore[attr-defined]  # no sync pool opened
        with pytest.raises(StoreError, match="closed"):
            await s.aappend({"role": "user", "content": "too late"})

    asyncio.run(main())
    with Session("native", compactor=compactor(), store=url) as again:
        assert len(again.history()) == 41 and again.system == "你是编程助手。"


def test_a_session_works_across_event_loops(store_target: str) -> None:
    """One Session used from two ``asyncio.run`` calls, from sync code in between, and from a
    loop in another thread: each loop gets its own async connection (PostgreSQL)."""
    s = Session("loops", compactor=compactor(), store=store_target)

    async def use(tag: str) -> None:
        for k in range(4):
            await s.aextend(tool_round(tag, k))
        await s.aprepare()
        assert validate_messages(await s.acontext(), format="openai") == []

    asyncio.run(use("a"))
    s.extend(tool_round("sync", 0))
    asyncio.run(use("b"))
    t = threading.Thread(target=lambda: asyncio.run(use("c")))
    t.start()
    t.join(60)
    contents = [m["content"].split()[0] for m in s.history() if m["role"] == "assistant"]
    assert contents == [f"a-{k}" for k in range(4)] + ["sync-0"] + [f"{t}-{k}" for t in "bc" for k in range(4)]
    if "://" in store_target:
        assert len(s.store._twins) <= 1  # type: ignore[attr-defined]  # the closed loops' twins were closed
    s.close()


CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from context_compactor import ContextCompactor, validate_messages
    from context_compactor.session import Session
    sys.path.insert(0, sys.argv[4])
    from test_store_async_native import compactor, tool_round

    target, proc, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main():
        s = await Session.aopen("shared", compactor=compactor(), store=target, format="openai", timeout=60)
        invalid, compacted = [], 0

        async def task(t):
            nonlocal compacted
            for k in range(n):
                await s.aextend(tool_round(f"{proc}{t}", k))
                r = await s.aprepare()
                compacted += r is not None and r.strategy != "none"
                ctx = await s.acontext()
                if validate_messages(ctx, format="openai"):
                    invalid.append(k)

        await asyncio.gather(*(task(t) for t in range(3)))
        await s.aclose()
        print(json.dumps({"invalid": invalid, "compacted": compacted}), flush=True)

    asyncio.run(main())
    """
)


def test_tasks_in_two_processes_append_and_compact_one_session(store_target: str, tmp_path: Path) -> None:
    """2 processes x 3 asyncio tasks x 12 tool rounds (an ``aextend`` of a call and its result,
    then ``aprepare``) on one session."""
    n = 12
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    Session("shared", compactor=compactor(), store=store_target, format="openai").close()
    here = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), store_target, p, str(n), here], stdout=subprocess.PIPE, text=True
        )
        for p in "PQ"
    ]
    compacted = 0
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
        report = json.loads(out)
        assert report["invalid"] == [], "every context a task read was valid"
        compacted += report["compacted"]
    assert compacted >= 2
    integrity(store_target, "shared")
    s = Session("shared", compactor=compactor(), store=store_target)
    history = s.history()
    calls = [m["content"].split()[0] for m in history if m["role"] == "assistant"]
    assert len(history) == 2 * 3 * n * 2 + 0 and len(set(calls)) == len(calls), "none stored twice"
    for tag in (f"{p}{t}" for p in "PQ" for t in range(3)):
        assert [c for c in calls if c.startswith(tag + "-")] == [f"{tag}-{k}" for k in range(n)], "none lost, in order"
    for k, m in enumerate(history):  # each call directly followed by its result (one transaction)
        if m["role"] == "assistant":
            assert history[k + 1]["tool_call_id"] == m["tool_calls"][0]["id"]
    ctx = s.context()
    assert validate_messages(ctx, format="openai") == []
    tail = history[s.compactions()[-1].upto_seq :]
    assert ctx[len(ctx) - len(tail) :] == tail  # the delta after the head compaction, verbatim
    assert {json.dumps(m, sort_keys=True) for m in history} <= covered(s), "every original still stands in the context"
    s.close()


def test_aprepare_cancelled_at_any_moment_leaves_the_store_consistent(store_target: str) -> None:
    """``aprepare(force=True)`` cancelled after 0..40 ms (before, in and after its summarizer,
    while saving) and once while its save waits for the session's lock: the store holds whole
    compactions only, and the Session's context is the store's."""

    async def slowish(request: object) -> str:
        await asyncio.sleep(0.01)
        return "<summary>Earlier: reads of src/app.py.</summary>"

    c = ContextCompactor(max_context_tokens=3000, reserve_tokens=300, summarizer=slowish)

    async def main() -> int:
        s = await Session.aopen("cancel", compactor=c, store=store_target, format="openai")
        cancelled = 0
        for i in range(16):
            await s.aextend(tool_round("c", i))
            task = asyncio.create_task(s.aprepare(force=True))
            await asyncio.sleep((i % 8) * 0.005)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
            ctx = await s.acontext()
            fresh = Session("cancel", compactor=c, store=store_target)
            assert ctx == fresh.context(), f"in step with the store after a cancel at {(i % 8) * 5} ms"
            assert validate_messages(ctx, format="openai") == []
            fresh.close()
        # Cancelled while its save waits for the session's row/write lock: the save still lands.
        await s.aextend(tool_round("c", 99))
        before = len(await s.acompactions())
        with lock_held(store_target, "cancel", 0.6) as released:
            task = asyncio.create_task(s.aprepare(force=True))
            await asyncio.sleep(0.3)
            cancelled_at = time.perf_counter()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # It waited for the store call to end: until the lock was released.
            assert time.perf_counter() - cancelled_at > 0.2 and released.wait(5)
        assert len(await s.acompactions()) == before + 1
        with Session("cancel", compactor=c, store=store_target) as fresh:
            assert await s.acontext() == fresh.context()
        await s.aclose()
        return cancelled

    cancelled = asyncio.run(main())
    assert cancelled >= 4
    integrity(store_target, "cancel")
    with Session("cancel", compactor=c, store=store_target) as s:
        assert len(s.history()) == 34
        assert {json.dumps(m, sort_keys=True) for m in s.history()} <= covered(s)


def test_async_session_meta_is_read_back_by_the_sync_store(postgres_server: Any) -> None:
    from context_compactor._postgres_async import AsyncPostgresStore

    url = postgres_server.new_database()
    meta = '{"format": "gemini", "config": null, "summarizer": "摘要"}'

    async def main() -> None:
        async with await AsyncPostgresStore.connect(url) as a:
            await a.open_session("m", system=None, tools=None, format=None)
            assert await a.session_meta("m") is None
            await a.set_session_meta("m", meta)
            assert await a.session_meta("m") == meta
            with pytest.raises(StoreError, match="'gone'"):
                await a.set_session_meta("gone", "{}")

    asyncio.run(main())
    with SessionStore(url) as store:
        assert store.session_meta("m") == meta
