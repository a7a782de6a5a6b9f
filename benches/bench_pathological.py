"""Exact counts of pathological runs (one character repeated) against ordinary text, in one run.

    python benches/bench_pathological.py [--mb 50] [--repeat 3] [--check] [--tiktoken-mb 1]

For o200k_base and cl100k_base: `count_tokens` of `--mb` MB of corpus text (the shared corpus's
message texts, tool names and arguments joined by newlines, repeated up to the size), then of
`--mb` MB runs of single characters (and of "ab"), each a single piece for the split except the
digits; best of `--repeat`, and each run's time over the corpus text's (the ratio). `--check`
exits non-zero if a run's ratio is above 3. Also timed, once and outside the check: `--mb` MB of
random lowercase letters, one long piece that never repeats.

Before any timing, every run's count at `--tiktoken-mb` MB is compared with tiktoken's
`encode_ordinary`; where tiktoken fails (its regex overflows its stack on ~1 MB of whitespace
for o200k), at 200 KB instead, and it says so.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from bench_exact import ENCODINGS, best_of, corpus_texts, offline_tiktoken

RUNS = ("a", "A", " ", "\n", "\t", "-", ".", "0", "é", "。", "中", "🚀", "ab")
LIMIT = 3.0


def run_of(unit: str, size: int) -> str:
    """`unit` repeated to `size` bytes of UTF-8 (rounded down to whole units)."""
    return unit * (size // len(unit.encode()))


def corpus_of(size: int) -> str:
    text = "\n".join(corpus_texts()).encode()
    return (text * (size // len(text) + 1))[:size].decode(errors="ignore")


def check_tiktoken(size: int) -> None:
    """Our counts equal tiktoken's on every run; where tiktoken fails, on a 200 KB run instead."""
    from context_compactor import count_tokens

    os.environ["RUST_BACKTRACE"] = "0"  # tiktoken's panics print one line, not a backtrace
    tiktoken = offline_tiktoken()
    print(f"counts equal tiktoken's on {size / 1e6:g} MB runs:")
    for name in ENCODINGS:
        enc = tiktoken.get_encoding(name)
        for unit in RUNS:
            note = ""
            for n in (size, 200_000):
                text = run_of(unit, n)
                t0 = time.perf_counter()
                try:
                    ref = len(enc.encode_ordinary(text))
                    break
                except BaseException:  # a Rust panic in tiktoken (PanicException derives from BaseException)
                    note = f" (tiktoken fails on {size / 1e6:g} MB: its regex overflows its stack; at 200 KB)"
            else:
                sys.exit(f"  {name} {unit!r}: tiktoken fails at 200 KB too")
            dt = time.perf_counter() - t0
            ours = count_tokens(text, encoding=name)
            if ours != ref:
                sys.exit(f"  {name} {unit!r}: ours {ours} != tiktoken {ref}")
            print(f"  {name} {unit!r}: {ours} tokens, tiktoken {dt:.2f} s{note}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50, help="size of each timed text, MB")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best counts")
    parser.add_argument("--check", action="store_true", help=f"exit 1 if a run takes over {LIMIT:g}x the corpus text")
    parser.add_argument(
        "--tiktoken-mb", type=float, default=1, help="size of the runs compared with tiktoken (0: skip)"
    )
    args = parser.parse_args()
    from context_compactor import count_tokens

    if args.tiktoken_mb > 0:
        check_tiktoken(int(args.tiktoken_mb * 1e6))
    size = int(args.mb * 1e6)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, best of {args.repeat}, {size / 1e6:g} MB each\n")
    print("| encoding | text | seconds | MB/s | tokens | x corpus text |")
    print("|---|---|---:|---:|---:|---:|")
    worst = 0.0
    corpus = corpus_of(size)
    letters = random.Random(1).randbytes(size).translate(bytes(97 + i % 26 for i in range(256))).decode()
    for name in ENCODINGS:
        count_tokens("warm up", encoding=name)
        base = best_of(args.repeat, lambda name=name: count_tokens(corpus, encoding=name))
        n = count_tokens(corpus, encoding=name)
        print(f"| {name} | corpus text | {base:.3f} | {size / base / 1e6:.0f} | {n} | 1.00 |")
        for unit in RUNS:
            text = run_of(unit, size)
            t = best_of(args.repeat, lambda text=text, name=name: count_tokens(text, encoding=name))
            n = count_tokens(text, encoding=name)
            worst = max(worst, t / base)
            print(f"| {name} | {unit!r} run | {t:.3f} | {size / t / 1e6:.0f} | {n} | {t / base:.2f} |")
        # Not a run: one long piece that never repeats, so every window is merged (timed once).
        t = best_of(1, lambda name=name: count_tokens(letters, encoding=name))
        print(f"| {name} | random letters (one piece) | {t:.3f} | {size / t / 1e6:.0f} | - | {t / base:.2f} |")
    print(f"\nworst ratio: {worst:.2f}x the corpus text (limit {LIMIT:g}x)")
    if args.check and worst > LIMIT:
        sys.exit(1)


if __name__ == "__main__":
    main()
