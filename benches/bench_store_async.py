"""`aprepare()` after an append on a large PostgreSQL session, three ways, in the same run:

- **native**: `await aappend()` + `await aprepare()` on the store's async connection (psycopg's
  `AsyncConnection`, :mod:`context_compactor._postgres_async`): no worker thread;
- **thread offload**: the same async methods with every store call in a worker thread (what
  SQLite does, and what PostgreSQL did before the async store);
- **sync from a coroutine**: `append()` + `prepare()` called on the loop (every store call
  blocks it for its round trip): the baseline for the loop's stall.

    python benches/bench_store_async.py [--messages 10000] [--steps 300] [--window 60000] [--rounds 3]
                                        [--sessions 32] [--contention]

Starts a throwaway PostgreSQL server (tests/_pg_server.py), fills one session with MESSAGES
messages (tool calls and results, CJK included), copies the database once per path (``CREATE
DATABASE ... TEMPLATE``: every path starts from the same state), compacts it once (untimed),
then runs STEPS steps of one append followed by prepare, with a window that makes it compact now
and then (the rule summary: no LLM), while a ticker task asks to wake every 1 ms and records how
late it wakes. Prints the p50/p95 latency of `aprepare()` (and of the append), the loop's longest
stall and p99 lateness, and the ratios native / thread offload: each figure the median of ROUNDS
rounds (the paths interleaved, each round on a fresh copy). Then SESSIONS sessions (500 messages
each, their own connections) run their steps concurrently on one loop, as in an async service:
the aggregate throughput and the p50/p95 latency of `aprepare()`, native against the thread
offload (whose worker threads are the executor's: ``min(32, CPUs + 4)``). With ``--contention`` a thread
in another connection keeps appending to the same session (the session's row lock is then
sometimes held by another worker, as with several workers behind a load balancer).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _pg_server import start_server
from context_compactor import ContextCompactor
from context_compactor.session import Session

PATHS = ("native", "thread offload", "sync from a coroutine")


def tool_round(i: int) -> list[dict[str, object]]:
    cid = f"call_{i}"
    return [
        {
            "role": "assistant",
            "content": f"Step {i}: reading src/mod{i}.py",
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": cid, "content": f"line {i} 输出\n" * 20},
    ]


def fill(target: str, n: int) -> None:
    s = Session("big", compactor=ContextCompactor(max_context_tokens=10**9), store=target)
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    i = 0
    while len(s) < n:
        s.extend([m for k in range(i, i + 100) for m in tool_round(k)][: n - len(s)])
        i += 100
    s.close()


def copy_database(server: Any, template: str) -> str:
    import psycopg

    server.databases += 1
    name = f"bench_copy_{server.databases}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return f"postgresql://postgres@127.0.0.1:{server.port}/{name}"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def run(target: str, steps: int, window: int, path: str, contention: bool) -> dict[str, float]:
    compactor = ContextCompactor(max_context_tokens=window)
    s = await Session.aopen("big", compactor=compactor, store=target)
    if path == "thread offload":

        async def no_native() -> None:
            return None

        s.store.aio = no_native  # type: ignore[method-assign]  # the async methods' worker-thread path
    await s.aprepare()  # the first compaction of the filled session: not timed
    lags: list[float] = []
    prepares: list[float] = []
    appends: list[float] = []
    stop = threading.Event()

    def other_worker() -> None:
        o = Session("big", compactor=ContextCompactor(max_context_tokens=10**9), store=target)
        k = 10**6
        while not stop.is_set():
            o.append({"role": "user", "content": f"from another worker {k}"})
            k += 1
            time.sleep(0.002)
        o.close()

    async def ticker() -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t0 - 0.001)

    other = threading.Thread(target=other_worker)
    if contention:
        other.start()
    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    compactions = 0
    t_start = time.perf_counter()
    for i in range(steps):
        msg = {"role": "user", "content": f"step {i}: 请继续 " + "words " * 80}
        t0 = time.perf_counter()
        if path == "sync from a coroutine":
            s.append(msg)
            t1 = time.perf_counter()
            r = s.prepare()
        else:
            await s.aappend(msg)
            t1 = time.perf_counter()
            r = await s.aprepare()
        t2 = time.perf_counter()
        appends.append(t1 - t0)
        prepares.append(t2 - t1)
        compactions += r is not None and r.strategy != "none"
        await asyncio.sleep(0)
    wall = time.perf_counter() - t_start
    tick.cancel()
    stop.set()
    if contention:
        other.join()
    await s.aclose()
    return {
        "prepare_p50": statistics.median(prepares) * 1e3,
        "prepare_p95": pct(prepares, 0.95) * 1e3,
        "append_p50": statistics.median(appends) * 1e3,
        "append_p95": pct(appends, 0.95) * 1e3,
        "stall_max": max(lags) * 1e3,
        "stall_p99": pct(lags, 0.99) * 1e3,
        "wall_s": wall,
        "compactions": compactions,
    }


async def run_many(target: str, sessions: int, steps: int, path: str) -> dict[str, float]:
    """``sessions`` Sessions (their own stores) appending and preparing concurrently on one loop."""
    compactor = ContextCompactor(max_context_tokens=20_000)
    opened = [await Session.aopen(f"s{k}", compactor=compactor, store=target) for k in range(sessions)]
    if path == "thread offload":

        async def no_native() -> None:
            return None

        for s in opened:
            s.store.aio = no_native  # type: ignore[method-assign]
    for s in opened:
        await s.aprepare()  # each session's first compaction: not timed
    lags: list[float] = []
    prepares: list[float] = []

    async def ticker() -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t0 - 0.001)

    async def agent(s: Session) -> None:
        for i in range(steps):
            await s.aappend({"role": "user", "content": f"step {i}: 请继续 " + "words " * 80})
            t0 = time.perf_counter()
            await s.aprepare()
            prepares.append(time.perf_counter() - t0)

    tick = asyncio.create_task(ticker())
    t0 = time.perf_counter()
    await asyncio.gather(*(agent(s) for s in opened))
    wall = time.perf_counter() - t0
    tick.cancel()
    for s in opened:
        await s.aclose()
    return {
        "steps_per_s": sessions * steps / wall,
        "prepare_p50": statistics.median(prepares) * 1e3,
        "prepare_p95": pct(prepares, 0.95) * 1e3,
        "stall_max": max(lags) * 1e3,
    }


def fill_many(target: str, sessions: int, n: int) -> None:
    for k in range(sessions):
        s = Session(f"s{k}", compactor=ContextCompactor(max_context_tokens=10**9), store=target)
        s.extend([m for i in range(n // 2) for m in tool_round(i)])
        s.close()


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--window", type=int, default=40_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--contention", action="store_true")
    args = ap.parse_args()
    server = start_server()
    try:
        template = server.new_database()
        t0 = time.perf_counter()
        fill(template, args.messages)
        print(f"filled a {args.messages:,}-message session in {time.perf_counter() - t0:.1f} s")
        runs: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
        for k in range(args.rounds):
            for path in PATHS[k % 3 :] + PATHS[: k % 3]:
                url = copy_database(server, template.rsplit("/", 1)[1])
                runs[path].append(asyncio.run(run(url, args.steps, args.window, path, args.contention)))
        results = {p: median_of(runs[p]) for p in PATHS}
        print(f"one {args.messages:,}-message session, median of {args.rounds} rounds:")
        for path, r in results.items():
            print(
                f"{path:22s} aprepare p50 {r['prepare_p50']:6.2f} ms  p95 {r['prepare_p95']:6.2f} ms | "
                f"append p50 {r['append_p50']:5.2f} ms  p95 {r['append_p95']:5.2f} ms | "
                f"loop stall max {r['stall_max']:6.1f} ms  p99 {r['stall_p99']:5.2f} ms | "
                f"{args.steps} steps in {r['wall_s']:.2f} s, {int(r['compactions'])} compactions"
            )
        nat, thr, syn = (results[p] for p in PATHS)
        print(
            f"native / thread offload: aprepare p50 {nat['prepare_p50'] / thr['prepare_p50']:.2f}x, "
            f"p95 {nat['prepare_p95'] / thr['prepare_p95']:.2f}x, "
            f"longest stall {nat['stall_max'] / max(thr['stall_max'], 1e-3):.2f}x, "
            f"wall {nat['wall_s'] / thr['wall_s']:.2f}x; "
            f"sync / native longest stall {syn['stall_max'] / max(nat['stall_max'], 1e-3):.1f}x"
            + (" (with another worker appending)" if args.contention else "")
        )
        if args.sessions:
            many = server.new_database()
            fill_many(many, args.sessions, 500)
            conc: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS[:2]}
            for k in range(args.rounds):
                for path in PATHS[:2] if k % 2 == 0 else PATHS[1::-1]:
                    url = copy_database(server, many.rsplit("/", 1)[1])
                    conc[path].append(asyncio.run(run_many(url, args.sessions, 20, path)))
            print(f"{args.sessions} sessions concurrently on one loop (20 steps each), median of {args.rounds} rounds:")
            for path in conc:
                r = median_of(conc[path])
                print(
                    f"{path:22s} {r['steps_per_s']:7.1f} steps/s | aprepare p50 {r['prepare_p50']:6.2f} ms  "
                    f"p95 {r['prepare_p95']:6.2f} ms | loop stall max {r['stall_max']:6.1f} ms"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
