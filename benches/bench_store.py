"""Session stores: `append()` + `prepare()` on a 10k-message session, PostgreSQL against SQLite
(the baseline, measured in the same run).

    python benches/bench_store.py [--messages 10000] [--steps 200]

Starts a throwaway PostgreSQL server (tests/_pg_server.py: as `nobody` under root, 127.0.0.1,
a free port), fills one session per backend with MESSAGES messages (tool rounds in batches of
`extend`), then times STEPS agent steps of one `append()` followed by `prepare()`, with a window
the session stays under (the check an agent makes every turn) and with one that makes it
compact. Also the time to open the 10k-message session in a new `Session` (a worker that picks
it up).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _pg_server import start_server
from context_compactor import ContextCompactor
from context_compactor.session import Session


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
    batch: list[dict[str, object]] = []
    i = 0
    while len(s) + len(batch) < n:
        batch.extend(tool_round(i))
        i += 1
        if len(batch) >= 500:
            s.extend(batch)
            batch = []
    if batch:
        s.extend(batch)
    s.close()


def steps(target: str, window: int, count: int) -> tuple[list[float], float, int]:
    t0 = time.perf_counter()
    s = Session("big", compactor=ContextCompactor(max_context_tokens=window), store=target)
    opened = time.perf_counter() - t0
    times = []
    compacted = 0
    base = len(s)
    for k in range(count):
        t = time.perf_counter()
        s.append({"role": "user", "content": f"continue with step {base + k}"})
        r = s.prepare()
        times.append(time.perf_counter() - t)
        compacted += r is not None and r.compacted
    s.close()
    return times, opened, compacted


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    server = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            targets = {"sqlite": str(Path(tmp) / "s.db"), "postgresql": server.new_database()}
            for name, target in targets.items():
                t0 = time.perf_counter()
                fill(target, args.messages)
                fill_s = time.perf_counter() - t0
                for label, window in (("under the window", 10**9), ("compacting", 64_000)):
                    # Each variant on a fresh copy of the session would cost another fill; the
                    # compacting run goes last, after the steady-state one.
                    times, opened, compacted = steps(target, window, args.steps)
                    print(
                        f"{name:<10} {args.messages} messages (filled in {fill_s:.1f} s), {label}: append+prepare "
                        f"p50 {pct(times, 0.5):.2f} ms, p95 {pct(times, 0.95):.2f} ms, max {max(times) * 1000:.1f} ms, "
                        f"mean {statistics.mean(times) * 1000:.2f} ms; {compacted} compactions; "
                        f"open the session {opened * 1000:.0f} ms"
                    )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
