"""Batch compaction: `context-compactor batch` with 1 and 2 worker processes, and `compact_many`
against a Python loop of `compact()`, both baselines measured in the same run.

    python benches/bench_batch.py [--copies 100] [--runs 3] [--check]

The shared corpus (CORPUS_DIR, default ../shared/corpus) is copied COPIES times into a temporary
folder (~29 files a copy) with one planted bad file; each command runs RUNS times and the
median is reported. Peak memory is the largest resident set of any process of the run
(the CLI or one of its workers), measured for the full folder and for a tenth of it: bounded
means it does not grow with the number of files. `--check` exits 1 if `--workers 2` is under
1.6x `--workers 1`, the bad file is not reported and skipped, or peak memory grows by more
than half from a tenth of the files to all of them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("CORPUS_DIR", HERE.parent.parent / "shared" / "corpus"))
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus")

# Runs the CLI as a child and prints the largest resident set (kB) of it and its workers.
WRAP = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
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


def run_batch(src: Path, out: Path, workers: int, report: Path) -> tuple[float, int, int]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "context_compactor.cli", "batch", str(src), "--out", str(out)]
    cmd += ["--workers", str(workers), "--max-tokens", "8000", "--report", str(report), "--no-progress"]
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t0
    rc, rss = map(int, r.stdout.split())
    return elapsed, rc, rss


def bench_cli(copies: int, runs: int) -> dict[str, float | bool | int]:
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        src, small = Path(tmp) / "in", Path(tmp) / "in-small"
        n = make_folder(src, copies)
        n_small = make_folder(small, max(1, copies // 10))
        report = Path(tmp) / "report.jsonl"
        times: dict[int, list[float]] = {1: [], 2: []}
        rss: dict[int, int] = {1: 0, 2: 0}
        for _ in range(runs):
            for w in (1, 2):
                t, rc, peak = run_batch(src, Path(tmp) / "out", w, report)
                times[w].append(t)
                rss[w] = max(rss[w], peak)
        lines = [json.loads(line) for line in report.read_text("utf-8").splitlines()]
        bad = [x for x in lines if x["file"].endswith("planted_bad.json")]
        failed = [x for x in lines if not x["ok"]]
        _, _, rss_small = run_batch(small, Path(tmp) / "out-small", 2, Path(tmp) / "report-small.jsonl")
    w1, w2 = statistics.median(times[1]), statistics.median(times[2])
    return {
        "files": n,
        "files_small": n_small,
        "workers1_s": w1,
        "workers2_s": w2,
        "speedup": w1 / w2,
        "rc": rc,
        "reported_lines": len(lines),
        "failed": len(failed),
        "bad_reported": len(bad) == 1 and not bad[0]["ok"] and bad[0]["error"]["type"] == "TranscriptError",
        "peak_rss_mb_workers1": rss[1] / 1024,
        "peak_rss_mb_workers2": rss[2] / 1024,
        "peak_rss_mb_tenth": rss_small / 1024,
    }


def bench_many(copies: int, runs: int) -> dict[str, float]:
    from context_compactor import ContextCompactor
    from context_compactor.io import load

    transcripts = []
    for p in sorted(CORPUS.rglob("*.json*")):
        with contextlib.suppress(Exception):  # the corpus has a file io.load does not read yet
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
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
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
        f"peak RSS (largest process): {r['peak_rss_mb_workers1']:.0f} MB with 1 worker, "
        f"{r['peak_rss_mb_workers2']:.0f} MB with 2; {r['peak_rss_mb_tenth']:.0f} MB for {r['files_small']} files"
    )
    print(
        f"report: {r['reported_lines']} lines, {r['failed']} failed, exit status {r['rc']}, "
        f"planted bad file reported and skipped: {r['bad_reported']}"
    )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if args.check:
        ok = (
            r["speedup"] >= 1.6
            and r["bad_reported"]
            and r["rc"] == 1
            and r["reported_lines"] == r["files"]
            and r["peak_rss_mb_workers2"] <= 1.5 * r["peak_rss_mb_tenth"]
        )
        print("check:", "PASS" if ok else "FAIL")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
