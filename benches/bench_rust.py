"""The Rust API next to the Python API on the same conversation, in one run (`make bench-rust`).

    python benches/bench_rust.py [--size 10000] [--repeat 5] [--profile release] [--binary PATH]

Input: one valid request of ``--size`` messages built from the corpus (`_data.conversation`),
written as JSON for the Rust side (`examples/bench_api.rs`) and handed as dicts to the Python
side. The Rust side is built as the Python extension is (``--profile release``: fat LTO, one
codegen unit; and mimalloc, the extension's allocator), so the two APIs' code is compared, not two
builds; ``--profile examples`` (no LTO, 16 codegen units, the tests' build) shows what a quicker
build costs, and ``--binary`` times a bench_api built elsewhere (an older commit). Timed: `check()` (cold: no
state) and `compact()` with the built-in rule summary, at a window of 10% of the conversation
(so a compaction is due), best of ``--repeat``; the two sides take turns on the same machine.
The Rust side reads `serde_json::Value`s; the Python side reads dicts (its boundary walks them in
place). Both must end at the same `tokens_after`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _data import conversation
from _rust import example
from context_compactor import ContextCompactor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", default="release", choices=("release", "examples"))
    ap.add_argument("--binary", type=Path, default=None)
    args = ap.parse_args()
    messages = conversation(args.size)
    tokens = ContextCompactor().check(messages).current_tokens
    window = max(1_500, tokens // 10)
    binary = args.binary or example("bench_api", args.profile)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "messages.json"
        path.write_text(json.dumps(messages), encoding="utf-8")
        command = [str(binary), str(path), str(window), str(args.repeat)]
        rust = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    compactor = ContextCompactor(max_context_tokens=window)
    py_check, py_compact = [], []
    after = 0
    for _ in range(args.repeat):
        t = time.perf_counter()
        compactor.check(messages)
        py_check.append(time.perf_counter() - t)
        t = time.perf_counter()
        after = compactor.compact(messages).tokens_after
        py_compact.append(time.perf_counter() - t)
    assert after == rust["tokens_after"], (after, rust["tokens_after"])
    built = f"binary {args.binary}" if args.binary else f"Rust built in the {args.profile} profile"
    print(f"{args.size:,} messages, {tokens:,} tokens, window {window:,} (10%); best of {args.repeat}; {built}")
    print(f"{'':10} {'Rust API':>12} {'Python API':>12} {'Python / Rust':>14}")
    for name, r, p in (("check()", rust["check_s"], py_check), ("compact()", rust["compact_s"], py_compact)):
        print(f"{name:10} {min(r) * 1e3:10.1f}ms {min(p) * 1e3:10.1f}ms {min(p) / min(r):13.2f}x")


if __name__ == "__main__":
    main()
