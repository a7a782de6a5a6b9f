"""The Session's async methods on both stores (:mod:`context_compactor._session_async`):
concurrent asyncio tasks appending to and compacting one session lose and duplicate nothing, a
store call never blocks the event loop (a ticker task measures how late the loop wakes it, while
another connection holds the session's lock), and cancellation and close leave the session
consistent."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from context_compactor import ContextCompactor, StoreError, validate_messages
from context_compactor.session import Session


class Ticker:
    """Wakes every 5 ms and records the longest delay past the wake-up it asked for."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - t0 - 0.005)

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@contextmanager
def lock_held(target: str, session_id: str, seconds: float) -> Iterator[threading.Event]:
    """Another connection holds the session's write lock for ``seconds`` (from when the returned
    event is set; the event is set just after the lock is released, so a waiter may see it unset
    for a moment: wait for it): the PostgreSQL row lock, or SQLite's write lock."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        if target.startswith("postgresql://"):
            import psycopg

            with psycopg.connect(target) as conn:
                conn.execute("SELECT 1 FROM context_compactor.sessions WHERE id = %s FOR UPDATE", (session_id,))
                taken.set()
                time.sleep(seconds)
        else:
            conn = sqlite3.connect(target, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            taken.set()
            time.sleep(seconds)
            conn.execute("ROLLBACK")
            conn.close()
        done.set()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert taken.wait(10)
    try:
        yield done
    finally:
        t.join(10)


async def summarize(request: object) -> str:
    await asyncio.sleep(0.01)
    return "<summary>Earlier: edits to /srv/app/main.py and 配置文件 config.yaml.</summary>"


def compactor() -> ContextCompactor:
    return ContextCompactor(max_context_tokens=4000, reserve_tokens=400, summarizer=summarize)


def test_concurrent_tasks_append_and_compact_one_session(store_target: str) -> None:
    """4 tasks x 30 exchanges (aextend of a user+assistant pair, aprepare after each) on one
    Session: every message stored once, compactions happened, every context valid, and the loop
    kept ticking."""

    async def main() -> tuple[Session, float]:
        s = await Session.aopen("shared", compactor=compactor(), store=store_target, format="openai")
        contexts: list[list[dict[str, Any]]] = []

        async def agent(k: int) -> None:
            for i in range(30):
                await s.aextend(
                    [
                        {"role": "user", "content": f"task {k} step {i}: 修复 main.py"},
                        {"role": "assistant", "content": f"done {k}/{i} " + "words " * 30},
                    ]
                )
                await s.aprepare()
                if i % 10 == 9:
                    contexts.append(await s.acontext())

        with Ticker() as ticker:
            await asyncio.gather(*(agent(k) for k in range(4)))
        return s, ticker.worst

    s, worst = asyncio.run(main())
    history = s.history()
    users = [m["content"] for m in history if m["role"] == "user"]
    assert sorted(users) == sorted(f"task {k} step {i}: 修复 main.py" for k in range(4) for i in range(30))
    assert len(history) == 240 and len(set(s.history_ids())) == 240
    assert len(s.compactions()) >= 2
    for ctx in [s.context()]:
        assert validate_messages(ctx, format="openai") == []
    s.close()
    # Another connection sees the same: nothing lost or duplicated in the store itself.
    again = Session("shared", compactor=ContextCompactor(), store=store_target)
    assert again.history() == history and validate_messages(again.context(), format="openai") == []
    again.close()
    assert worst < 1.0, f"the loop stalled {worst:.3f} s"


def test_a_store_call_never_blocks_the_event_loop(store_target: str) -> None:
    """Another connection holds the session's lock for 1 s: ``aappend`` and ``aprepare`` wait
    for it (on the async connection with PostgreSQL, in a worker thread with SQLite) while the
    loop keeps ticking; the sync ``append`` in a coroutine
    stalls the loop for the whole wait (what the ticker would see without the async methods)."""

    async def main() -> None:
        s = await Session.aopen("locked", compactor=compactor(), store=store_target, format="openai")
        await s.aappend({"role": "user", "content": "first"})
        with lock_held(store_target, "locked", 1.0) as released:
            with Ticker() as ticker:
                t0 = time.perf_counter()
                row = await s.aappend({"role": "assistant", "content": "waited for the lock"})
                waited = time.perf_counter() - t0
                assert released.wait(5) and waited > 0.8
                await asyncio.sleep(0.02)
            assert ticker.worst < 0.35, f"aappend stalled the loop {ticker.worst:.3f} s"
        await s.aextend(
            [{"role": r, "content": f"{r} {k} " + "words " * 60} for k in range(12) for r in ("user", "assistant")]
        )
        with lock_held(store_target, "locked", 1.0) as released:
            with Ticker() as ticker:
                result = await s.aprepare(force=True)  # its commit waits for the lock
                assert released.wait(5)
                await asyncio.sleep(0.02)
            assert ticker.worst < 0.35, f"aprepare stalled the loop {ticker.worst:.3f} s"
        assert result is not None and result.summary_source == "llm"
        assert (await s.acompactions())[-1].upto_seq == 26
        assert row in s.history_ids()
        with lock_held(store_target, "locked", 1.0):
            with Ticker() as ticker:
                await asyncio.sleep(0.02)  # the ticker runs
                s.append({"role": "user", "content": "sync, from a coroutine"})
                await asyncio.sleep(0.02)
            assert ticker.worst > 0.8  # the baseline: the sync call blocked the loop
        await s.aclose()

    asyncio.run(main())


def test_cancellation_and_close_leave_the_session_consistent(store_target: str) -> None:
    """A cancelled ``aappend`` finishes its transaction before the cancellation goes on (it
    committed: the message is in the history once); a ``aprepare`` cancelled in its summarizer
    saves nothing; the session goes on; after ``aclose`` a call raises StoreError."""

    async def slow(request: object) -> str:
        await asyncio.sleep(30)
        return "never"

    async def main() -> None:
        opening = asyncio.create_task(
            Session.aopen("cancel", compactor=compactor(), store=store_target, format="openai")
        )
        await asyncio.sleep(0)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        s = await Session.aopen("cancel", compactor=compactor(), store=store_target, format="openai")
        await s.aappend({"role": "user", "content": "first"})
        # Held 2 s; cancelled after 0.5 s (time enough for the call to reach the lock on a
        # loaded machine), so the cancellation waits ~1.5 s for the store call to end.
        with lock_held(store_target, "cancel", 2.0) as released:
            task = asyncio.create_task(s.aappend({"role": "assistant", "content": "cancelled while waiting"}))
            await asyncio.sleep(0.5)
            cancelled_at = time.perf_counter()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # It waited for the store call to end: until the lock was released.
            assert time.perf_counter() - cancelled_at > 0.5 and released.wait(5)
        assert [m["content"] for m in await s.ahistory()] == ["first", "cancelled while waiting"]
        # A compaction cancelled in its summarizer saves nothing.
        s2 = await Session.aopen(
            "cancel",
            compactor=ContextCompactor(max_context_tokens=4000, reserve_tokens=400, summarizer=slow),
            store=store_target,
        )
        await s2.aextend(
            [{"role": r, "content": f"{r} {k} " + "words " * 60} for k in range(12) for r in ("user", "assistant")]
        )
        task = asyncio.create_task(s2.aprepare(force=True))
        await asyncio.sleep(0.3)
        assert not task.done()  # in the summarizer
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await s2.acompactions() == []
        await s2.aclose()
        # The session goes on: appends and a compaction after the cancellations.
        await s.aappend({"role": "user", "content": "after"})
        result = await s.aprepare(force=True)
        assert result is not None and len(await s.acompactions()) == 1
        assert validate_messages(await s.acontext(), format="openai") == []
        assert len(await s.ahistory()) == 27
        await s.aclose()
        with pytest.raises(StoreError, match="closed"):
            await s.aappend({"role": "user", "content": "too late"})

    asyncio.run(main())
