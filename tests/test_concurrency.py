"""Threads, the GIL and fork (DESIGN: heavy work runs with the GIL released; ``ContextCompactor``
is immutable and thread-safe; the rayon pool must not deadlock a forked child).

Timing-based checks compare a Python thread's progress while the library works against the
length of the call itself, so they hold on a loaded 2-core machine too.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from context_compactor import (
    CompactResult,
    ContextCompactor,
    ConversationState,
    SummaryRequest,
    count_tokens,
    count_tokens_many,
    validate_messages,
)
from strategies import ScriptedSummarizer, reply_for

PROSE = (
    "The deploy script reads its settings from the environment; 部署脚本从环境变量读取配置。 "
    "def total(items): return sum(i.price * i.qty for i in items)  🚀 https://example.com/x?y=1 "
)


def texts(total_bytes: int, n: int = 64) -> list[str]:
    """``n`` distinct texts of about ``total_bytes`` together (distinct: no cache can help)."""
    per = max(total_bytes // n, 1)
    reps = per // len(PROSE.encode()) + 1
    return [f"{i}: " + PROSE * reps for i in range(n)]


def conversation(i: int, blocks: int = 20, size: int = 300) -> list[dict[str, Any]]:
    """A distinct tool-using OpenAI conversation per ``i``."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": f"Agent {i}."},
        {"role": "user", "content": f"Task {i}: fix /srv/app/mod{i}.py"},
    ]
    for k in range(blocks):
        cid = f"c{i}_{k}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {k} of {i}. " + PROSE,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat f{k}.py " * (k + 1)})},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"line {k} of {i}\n" * (size + 10 * i)})
    msgs.append({"role": "assistant", "content": f"Done with {i}."})
    return msgs


def huge_conversation(messages: int = 40, size: int = 250_000) -> list[dict[str, Any]]:
    text = PROSE * (size // len(PROSE) + 1)
    out: list[dict[str, Any]] = []
    for i in range(messages):
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + text})
    return out


# -- the GIL ------------------------------------------------------------------------------------------------


def gil_probe(work: Callable[[], Any]) -> tuple[float, float, int]:
    """Run ``work`` while a Python thread ticks. Returns (duration of work, longest pause between
    two ticks during it, ticks during it)."""
    stamps: list[float] = []
    stop = threading.Event()
    started = threading.Event()

    def ticker() -> None:
        started.set()
        while not stop.is_set():
            stamps.append(time.perf_counter())
            # Pure Python work between stamps; a thread holding the GIL in C stops this.
            sum(range(200))

    t = threading.Thread(target=ticker, daemon=True)
    t.start()
    started.wait()
    time.sleep(0.02)
    t0 = time.perf_counter()
    work()
    t1 = time.perf_counter()
    stop.set()
    t.join()
    during = [s for s in stamps if t0 <= s <= t1]
    points = [t0, *during, t1]
    gap = max(b - a for a, b in itertools.pairwise(points))
    return t1 - t0, gap, len(during)


def _assert_gil_released(make_work: Callable[[int], Callable[[], Any]], what: str) -> None:
    """``make_work(scale)`` builds the work for an input ``scale`` times the base size; the scale
    doubles until one call takes long enough to measure (it also warms the tables up)."""
    scale = 1
    while True:
        work = make_work(scale)
        t0 = time.perf_counter()
        work()
        if time.perf_counter() - t0 >= 0.2 or scale >= 64:
            break
        scale *= 2
    # A held GIL fails every attempt; a busy machine may stall the ticker once.
    for _ in range(3):
        duration, gap, ticks = gil_probe(work)
        if ticks > 10 and gap < 0.5 * duration:
            break
    assert duration > 0.05, f"{what}: too quick to measure ({duration:.3f}s)"
    assert ticks > 10, f"{what}: a Python thread made {ticks} steps in {duration:.2f}s: the GIL was held"
    assert gap < 0.5 * duration, f"{what}: a Python thread waited {gap:.2f}s of {duration:.2f}s: the GIL was held"


def test_count_tokens_many_releases_the_gil() -> None:
    def make(scale: int) -> Callable[[], Any]:
        batch = texts(1_000_000 * scale)
        return lambda: count_tokens_many(batch, "o200k_base")

    _assert_gil_released(make, "count_tokens_many")


def test_count_tokens_releases_the_gil() -> None:
    def make(scale: int) -> Callable[[], Any]:
        text = "".join(texts(1_000_000 * scale))
        return lambda: count_tokens(text, "cl100k_base")

    _assert_gil_released(make, "count_tokens")


def test_check_on_a_huge_conversation_releases_the_gil() -> None:
    c = ContextCompactor(tokenizer="o200k_base")

    def make(scale: int) -> Callable[[], Any]:
        messages = huge_conversation(messages=40, size=25_000 * scale)
        return lambda: c.check(messages)

    _assert_gil_released(make, "check() with o200k_base")


def test_check_on_a_long_conversation_releases_the_gil() -> None:
    # Thousands of messages: read with the GIL (it must be), counted on the pool meanwhile, and
    # the counting left after the reading is waited for with the GIL released.
    c = ContextCompactor(tokenizer="o200k_base")

    def make(scale: int) -> Callable[[], Any]:
        messages = huge_conversation(messages=2_000, size=500 * scale)
        return lambda: c.check(messages)

    _assert_gil_released(make, "check() of 2,000 messages with o200k_base")


def test_compact_on_a_huge_conversation_releases_the_gil() -> None:
    c = ContextCompactor(max_context_tokens=100_000, reserve_tokens=0, tokenizer="o200k_base")

    def make(scale: int) -> Callable[[], Any]:
        messages = huge_conversation(messages=200, size=2_500 * scale)
        return lambda: c.compact(messages)

    _assert_gil_released(make, "compact() with o200k_base")


# -- one compactor, eight threads ---------------------------------------------------------------------------------


def _snapshot(value: Any) -> Any:
    if isinstance(value, CompactResult):
        return (_snapshot(value.messages), _snapshot(value.system), value.summary, value.tokens_after, value.record)
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_snapshot(v) for v in value]
    return value


def test_one_compactor_from_eight_threads_gives_the_sequential_results() -> None:
    def summarizer(req: SummaryRequest) -> str:
        time.sleep(0.001)  # let the threads interleave inside compact()
        return reply_for("ok", req)

    compactor = ContextCompactor(
        max_context_tokens=6000,
        reserve_tokens=500,
        keep_recent_messages=4,
        clear_at_least_tokens=0,
        summarizer=summarizer,
    )
    exact = compactor.with_config(tokenizer="o200k_base")
    convos = [conversation(i, blocks=10 + i, size=100 + 20 * i) for i in range(8)]
    shared_state = ConversationState()  # thread-safe: a cache, so results cannot depend on it

    def job(i: int) -> Any:
        msgs = convos[i]
        return (
            compactor.check(msgs).current_tokens,
            compactor.check(msgs, state=shared_state).current_tokens,
            exact.check(msgs).current_tokens,
            compactor.counter.count_messages(msgs),
            _snapshot(compactor.micro_compact(msgs)),
            _snapshot(compactor.compact(msgs)),
            _snapshot(compactor.compact(msgs, force=True, pinned=[2])),
            _snapshot(exact.plan(msgs, force=True).apply(None)),
            validate_messages(msgs),
            count_tokens_many([m["content"] or "" for m in msgs] * 20),
        )

    expected = [job(i) for i in range(8)]
    before = json.dumps(convos)
    rounds = 3
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(job, [i for _ in range(rounds) for i in range(8)]))
    for k, g in enumerate(got):
        assert g == expected[k % 8], f"thread result {k} (conversation {k % 8}) differs from the sequential one"
    assert json.dumps(convos) == before, "no thread mutated an input"


def test_states_shared_across_threads_stay_consistent() -> None:
    """Each thread keeps its own conversation and state; one compactor; interleaved appends."""
    compactor = ContextCompactor(max_context_tokens=8000, reserve_tokens=0)

    def run(i: int) -> list[int]:
        state = ConversationState()
        msgs: list[dict[str, Any]] = []
        counts = []
        for k, m in enumerate(conversation(i, blocks=15)):
            msgs.append(m)
            if k % 3 == 0:
                counts.append(compactor.check(msgs, state=state).current_tokens)
        return counts

    expected = [run(i) for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(run, range(8))) == expected


def test_flaky_summarizers_from_threads() -> None:
    """Summarizers that fail in different ways on different threads: each result is its own."""
    behaviours = [["ok"], ["timeout"], ["rate_limit"], ["empty"], ["huge"], ["no_tags"], ["none"], ["connection"]]

    def job(i: int) -> Any:
        c = ContextCompactor(
            max_context_tokens=6000,
            reserve_tokens=0,
            keep_recent_messages=4,
            summarizer=ScriptedSummarizer(behaviours[i]),
        )
        r = c.compact(conversation(i), force=True)
        assert validate_messages(r.messages) == []
        return _snapshot(r), r.fallback_reason is None

    expected = [job(i) for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(job, range(8))) == expected


# -- fork ----------------------------------------------------------------------------------------------------------


def _child_work() -> None:
    """What a forked child does: the same calls, including a parallel count."""
    batch = texts(2_000_000)
    assert count_tokens_many(batch, "o200k_base") == [count_tokens(t, "o200k_base") for t in batch]
    c = ContextCompactor(max_context_tokens=6000, reserve_tokens=0, keep_recent_messages=4, tokenizer="o200k_base")
    r = c.compact(conversation(1))
    assert r.strategy != "none" and validate_messages(r.messages) == []
    assert c.check(conversation(2)).current_tokens > 0


def _fork_and_wait(child: Callable[[], None], timeout: float = 120.0) -> None:
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            signal.alarm(int(timeout))  # a deadlock ends in SIGALRM, not a hung CI job
            child()
            code = 0
        except BaseException as e:
            try:
                sys.stderr.write(f"child failed: {type(e).__name__}: {e}\n")
            finally:
                code = 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child deadlocked (killed after the timeout)")
        time.sleep(0.05)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        pytest.fail(
            f"the forked child died of signal {sig}" + (" (timeout: deadlock)" if sig == signal.SIGALRM else "")
        )
    assert os.WEXITSTATUS(status) == 0, f"the forked child failed (exit status {os.WEXITSTATUS(status)})"


fork_only = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="needs os.fork (POSIX)")


@fork_only
def test_fork_after_parallel_counting_and_compact_does_not_deadlock() -> None:
    batch = texts(2_000_000)
    assert len(count_tokens_many(batch, "o200k_base")) == len(batch)  # builds and uses the rayon pool
    ContextCompactor(max_context_tokens=6000, reserve_tokens=0, tokenizer="o200k_base").compact(conversation(0))
    _fork_and_wait(_child_work)
    # The parent's pool still works after the fork.
    assert count_tokens_many(batch, "o200k_base") == [count_tokens(t, "o200k_base") for t in batch]


@fork_only
def test_fork_while_another_thread_is_counting_does_not_deadlock() -> None:
    batch = texts(4_000_000)
    count_tokens_many(batch, "o200k_base")
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            count_tokens_many(batch, "o200k_base")

    t = threading.Thread(target=busy, daemon=True)
    t.start()
    try:
        time.sleep(0.05)  # the pool is mid-batch when we fork
        _fork_and_wait(_child_work)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not t.is_alive()
