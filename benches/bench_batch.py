"""Batch compaction: `context-compactor batch` with 1 and 2 worker processes, and `compact_many`
against a Python loop of `compact()`, both baselines measured in the same run.

    python benches/bench_batch.py [--copies 100] [--runs 3] [--check]

The shared corpus (CORPUS_DIR, default ../shared/corpus) is copied COPIES times into a temporary
folder (29 files a copy) with one planted bad file; each command runs RUNS times, alternating
which of the two goes first, and the median is reported. Nothing is pinned that a user would not
have (no CPU affinity, no thread-count variables): the machine's load average is printed before
and after every run, since other processes on a shared machine take cores from `--workers 2`
(and the ratio with them). CPU time is printed too: the time of every process of the run, and
of the CLI process alone (with workers, its bookkeeping). Peak memory is the largest resident
set of any process of the run (the CLI, the forkserver or a worker), measured for the full
folder and for a tenth of it: bounded means it does not grow with the number of files.
Linux shares CPU time between sessions (autogroup scheduling), not processes: when another
session keeps the cores busy, the batch's session gets its share however many workers it
runs, and `--workers 2` is then barely faster than `--workers 1`. So each run prints how many
cores other processes used just before it (from /proc/stat), and `--wait-quiet SECONDS` waits
for a quiet machine before each run.
`--check` exits 1 if `--workers 2` is under 1.6x `--workers 1`, the bad file is not reported
and skipped, any other file fails, or peak memory grows by more than half from a tenth of the
files to all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("CORPUS_DIR", HERE.parent.parent / "shared" / "corpus"))
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus")

# Runs the CLI as a child and prints, as JSON: its exit status, wall time, its own CPU time (the
# parent's bookkeeping when there are workers), the CPU time of every process of the run and the
# largest resident set of any of them. Workers are children of the forkserver, which the CLI
# never waits for: this wrapper makes itself their subreaper (Linux prctl) and waits for every
# descendant, so their time and memory are counted.
WRAP = """
import ctypes, json, os, resource, subprocess, sys, time
try:
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
except Exception:
    pass
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, own = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
while True:
    try:
        os.wait4(-1, 0)
    except ChildProcessError:
        break
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "wall": wall, "cli_cpu": own.ru_utime + own.ru_stime,
                  "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss}))
"""


def make_folder(root: Path, copies: int) -> int:
    files = [p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")]
    for i in range(copies):
        for p in files:
            dest = root / f"copy{i:03d}" / p.relative_to(CORPUS)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
    (root / "copy000" / "planted_bad.json").write_text('[{"role": "user", "content": "unterminated', "utf-8")
    return copies * len(files) + 1


def load1() -> float:
    return os.getloadavg()[0]


def busy_cores(seconds: float = 1.0) -> float:
    """Cores kept busy by other processes, sampled from /proc/stat over ``seconds`` (before a run,
    when nothing of ours runs); ``nan`` where there is no /proc/stat."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]  # idle + iowait
        return sum(v[:8]) - idle, sum(v[:8])

    try:
        b0, t0 = sample()
        time.sleep(seconds)
        b1, t1 = sample()
    except OSError:
        return float("nan")
    return (os.cpu_count() or 1) * (b1 - b0) / max(t1 - t0, 1)


def wait_quiet(limit: float, timeout: float) -> float:
    """Wait (up to ``timeout`` seconds) until other processes use under ``limit`` cores; their use."""
    end = time.monotonic() + timeout
    busy = busy_cores()
    while busy >= limit and time.monotonic() < end:
        busy = busy_cores(2.0)
    return busy


QUIET: dict[str, float] = {"limit": 0.0, "timeout": 0.0}


def run_batch(src: Path, out: Path, workers: int, report: Path) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "context_compactor.cli", "batch", str(src), "--out", str(out)]
    cmd += ["--workers", str(workers), "--max-tokens", "8000", "--report", str(report), "--no-progress"]
    busy = wait_quiet(QUIET["limit"], QUIET["timeout"]) if QUIET["timeout"] else busy_cores()
    before = load1()
    r = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, check=True)
    run: dict[str, float] = json.loads(r.stdout)
    run.update(load_before=before, load_after=load1(), busy_before=busy)
    return run


def bench_cli(copies: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        src, small = Path(tmp) / "in", Path(tmp) / "in-small"
        n = make_folder(src, copies)
        n_small = make_folder(small, max(1, copies // 10))
        report = Path(tmp) / "report.jsonl"
        done: dict[int, list[dict[str, float]]] = {1: [], 2: []}
        for i in range(runs):
            for w in (1, 2) if i % 2 == 0 else (2, 1):  # alternate the order: a drift in load hits both
                run = run_batch(src, Path(tmp) / "out", w, report)
                done[w].append(run)
                print(
                    f"  run {i + 1} --workers {w}: {run['wall']:.1f} s wall, {run['cpu']:.1f} s CPU in all, "
                    f"{run['cli_cpu']:.1f} s in the CLI process; before it other processes used "
                    f"{run['busy_before']:.2f} cores, load average {run['load_before']:.1f} before, "
                    f"{run['load_after']:.1f} after",
                    flush=True,
                )
        lines = [json.loads(line) for line in report.read_text("utf-8").splitlines()]
        bad = [x for x in lines if x["file"].endswith("planted_bad.json")]
        failed = [x for x in lines if not x["ok"]]
        small_run = run_batch(small, Path(tmp) / "out-small", 2, Path(tmp) / "report-small.jsonl")
    med = {w: {k: statistics.median(r[k] for r in done[w]) for k in ("wall", "cpu", "cli_cpu")} for w in (1, 2)}
    return {
        "files": n,
        "files_small": n_small,
        "workers1_s": med[1]["wall"],
        "workers2_s": med[2]["wall"],
        "workers1_cpu": med[1]["cpu"],
        "workers2_cpu": med[2]["cpu"],
        "workers2_parent_cpu": med[2]["cli_cpu"],
        "speedup": med[1]["wall"] / med[2]["wall"],
        "rc": done[2][-1]["rc"],
        "rc1": done[1][-1]["rc"],
        "reported_lines": len(lines),
        "failed": len(failed),
        "failed_other": [x["file"] for x in failed if not x["file"].endswith("planted_bad.json")],
        "bad_reported": len(bad) == 1 and not bad[0]["ok"] and bad[0]["error"]["type"] == "TranscriptError",
        "peak_rss_mb_workers1": max(r["rss_kb"] for r in done[1]) / 1024,
        "peak_rss_mb_workers2": max(r["rss_kb"] for r in done[2]) / 1024,
        "peak_rss_mb_tenth": small_run["rss_kb"] / 1024,
    }


def bench_many(copies: int, runs: int) -> dict[str, float]:
    from context_compactor import ContextCompactor
    from context_compactor.io import load

    transcripts = []
    for p in sorted(CORPUS.rglob("*.json*")):
        transcripts.append(load(p))
    transcripts *= copies
    c = ContextCompactor(max_context_tokens=8000)
    loop, many = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        a = [c.compact(t.messages, system=t.system, tools=t.tools, format=t.format) for t in transcripts]
        t1 = time.perf_counter()
        b = c.compact_many(transcripts)
        t2 = time.perf_counter()
        loop.append(t1 - t0)
        many.append(t2 - t1)
        assert [r.messages for r in a] == [r.messages for r in b]
    return {
        "conversations": len(transcripts),
        "loop_s": statistics.median(loop),
        "many_s": statistics.median(many),
        "ratio": statistics.median(loop) / statistics.median(many),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--check", action="store_true")
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each run, wait up to SECONDS until other processes use under --quiet-cores cores",
    )
    ap.add_argument("--quiet-cores", type=float, default=0.3)
    args = ap.parse_args()
    QUIET.update(limit=args.quiet_cores, timeout=args.wait_quiet)
    print(f"cores: {os.cpu_count()}, load average {load1():.1f} (1 min) at the start")
    m = bench_many(10, args.runs)
    print(
        f"compact_many vs a loop of compact(): {m['conversations']} conversations, loop {m['loop_s']:.3f} s, "
        f"compact_many {m['many_s']:.3f} s, {m['ratio']:.2f}x (median of {args.runs})"
    )
    r = bench_cli(args.copies, args.runs)
    print(
        f"batch over {r['files']} files: --workers 1 {r['workers1_s']:.1f} s, --workers 2 {r['workers2_s']:.1f} s, "
        f"speedup {r['speedup']:.2f}x (median of {args.runs}; target >= 1.6x)"
    )
    print(
        f"CPU time (median): {r['workers1_cpu']:.1f} s with 1 worker, {r['workers2_cpu']:.1f} s with 2 "
        f"(of which {r['workers2_parent_cpu']:.1f} s in the parent process)"
    )
    print(
        f"peak RSS (largest process): {r['peak_rss_mb_workers1']:.0f} MB with 1 worker, "
        f"{r['peak_rss_mb_workers2']:.0f} MB with 2; {r['peak_rss_mb_tenth']:.0f} MB for {r['files_small']} files"
    )
    print(
        f"report: {r['reported_lines']} lines, {r['failed']} failed, exit status {r['rc']}, "
        f"planted bad file reported and skipped: {r['bad_reported']}, other failures: {r['failed_other'][:3]}"
    )
    print(f"load average after: {load1():.1f}")
    if args.check:
        ok = (
            r["speedup"] >= 1.6
            and r["bad_reported"]
            and not r["failed_other"]
            and r["rc"] == 1
            and r["rc1"] == 1
            and r["reported_lines"] == r["files"]
            and r["peak_rss_mb_workers2"] <= 1.5 * r["peak_rss_mb_tenth"]
        )
        print("check:", "PASS" if ok else "FAIL")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
