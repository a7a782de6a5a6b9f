"""The event loop's longest stall during agent steps on a PostgreSQL session: the sync path
(`append()` + `prepare()` called from a coroutine: every store call blocks the loop for its round
trip) against the async path (`await aappend()` + `await aprepare()`: the store calls in a worker
thread, :mod:`context_compactor._session_async`), measured in the same run.

    python benches/bench_store_async.py [--steps 200] [--messages 2000] [--contention]

Starts a throwaway PostgreSQL server (tests/_pg_server.py), fills one session per path with
MESSAGES messages, then runs STEPS steps of one append followed by prepare, with a window that
makes it compact now and then (the rule summary: no LLM), while a ticker task asks to wake every
1 ms and records how late it wakes. With ``--contention`` a thread in another connection keeps
appending to the same session (the session's row lock is then sometimes held by another worker,
as with several workers behind a load balancer).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _pg_server import start_server
from context_compactor import ContextCompactor
from context_compactor.session import Session

WINDOW = 60_000


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
    s = Session(ContextCompactor(max_context_tokens=10**9), target, "big")
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    i = 0
    while len(s) < n:
        s.extend([m for k in range(i, i + 100) for m in tool_round(k)])
        i += 100
    s.close()


async def run(target: str, count: int, asynchronous: bool, contention: bool) -> dict[str, float]:
    s = await Session.aopen(ContextCompactor(max_context_tokens=WINDOW), target, "big")
    lags: list[float] = []
    stop = threading.Event()

    def other_worker() -> None:
        o = Session(ContextCompactor(max_context_tokens=10**9), target, "big")
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
    t0 = time.perf_counter()
    for i in range(count):
        msg = {"role": "user", "content": f"step {i}: 请继续 " + "words " * 40}
        if asynchronous:
            await s.aappend(msg)
            r = await s.aprepare()
        else:
            s.append(msg)
            r = s.prepare()
        compactions += r is not None and r.strategy != "none"
        await asyncio.sleep(0)
    wall = time.perf_counter() - t0
    tick.cancel()
    stop.set()
    if contention:
        other.join()
    await s.aclose()
    lags.sort()
    return {
        "worst_ms": lags[-1] * 1e3,
        "p99_ms": lags[int(len(lags) * 0.99)] * 1e3,
        "median_ms": statistics.median(lags) * 1e3,
        "wall_s": wall,
        "compactions": compactions,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--contention", action="store_true")
    args = ap.parse_args()
    server = start_server()
    try:
        results = {}
        for name, asynchronous in (("sync path (append + prepare)", False), ("async path (aappend + aprepare)", True)):
            url = server.new_database()
            fill(url, args.messages)
            results[name] = r = asyncio.run(run(url, args.steps, asynchronous, args.contention))
            print(
                f"{name:34s} loop stall: worst {r['worst_ms']:7.1f} ms  p99 {r['p99_ms']:6.2f} ms  "
                f"median {r['median_ms']:5.2f} ms | {args.steps} steps in {r['wall_s']:.2f} s, "
                f"{int(r['compactions'])} compactions"
            )
        sync, asy = results.values()
        print(
            f"worst stall sync/async: {sync['worst_ms'] / max(asy['worst_ms'], 1e-3):.1f}x, "
            f"p99 sync/async: {sync['p99_ms'] / max(asy['p99_ms'], 1e-3):.1f}x, "
            f"wall async/sync: {asy['wall_s'] / sync['wall_s']:.2f}x"
            + (" (with another worker appending)" if args.contention else "")
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
