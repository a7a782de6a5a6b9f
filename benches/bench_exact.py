"""Exact token counting (`count_tokens`, `count_tokens_many`) against Python tiktoken, in one run.

    python benches/bench_exact.py [--repeat N]

On the shared corpus (every message text, tool name and tool-call argument string of
`../shared/corpus/openai`, or `$CORPUS_DIR`), for o200k_base and cl100k_base: one text at a
time (`count_tokens(t)` vs `len(enc.encode_ordinary(t))`) and the whole batch
(`count_tokens_many(texts)` vs `enc.encode_ordinary_batch(texts)`, tiktoken's thread pool),
on all texts and on the Chinese-heavy ones; best of N runs, MB/s of UTF-8 and the ratio.
Also: the first-use table load time (fresh interpreter) and the size of the built extension.
tiktoken is loaded offline from the rank files the library ships (`src/tokens/data/ranks.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _data

REPO = Path(__file__).resolve().parent.parent
ENCODINGS = ("o200k_base", "cl100k_base")


def is_chinese_heavy(text: str) -> bool:
    return sum(1 for c in text if "\u4e00" <= c <= "\u9fff") * 5 > len(text) > 0


def offline_tiktoken() -> Any:
    """tiktoken with its cache filled from our rank files: no network."""
    spec = importlib.util.spec_from_file_location("_exact_ranks", REPO / "src" / "tokens" / "data" / "ranks.py")
    assert spec is not None and spec.loader is not None
    ranks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ranks)
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-bench-"))
    for name in ENCODINGS:
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(ranks.tiktoken_file(name))
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    return tiktoken


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def first_use_ms(encoding: str) -> float:
    """Milliseconds the first exact count takes in a fresh interpreter, less a warm call."""
    code = (
        "import time, context_compactor as c\n"
        f"t0 = time.perf_counter(); c.count_tokens('x', encoding={encoding!r}); t1 = time.perf_counter()\n"
        f"c.count_tokens('x', encoding={encoding!r}); t2 = time.perf_counter()\n"
        "print((t1 - t0 - (t2 - t1)) * 1e3)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out)


def run(repeat: int = 5) -> list[dict[str, Any]]:
    """One row per (encoding, text set, mode): MB/s of ours and of tiktoken, and the ratio."""
    from context_compactor import count_tokens, count_tokens_many

    tiktoken = offline_tiktoken()
    texts = _data.corpus_texts()
    sets = {"corpus": texts, "Chinese-heavy": [t for t in texts if is_chinese_heavy(t)]}
    rows = []
    for name in ENCODINGS:
        enc = tiktoken.get_encoding(name)
        count_tokens("warm up", encoding=name)
        for set_name, ts in sets.items():
            size = sum(len(t.encode("utf-8")) for t in ts)
            assert count_tokens_many(ts, encoding=name) == [len(x) for x in enc.encode_ordinary_batch(ts)]
            cases = {
                "one text at a time": (
                    lambda ts=ts, name=name: [count_tokens(t, encoding=name) for t in ts],
                    lambda ts=ts, enc=enc: [len(enc.encode_ordinary(t)) for t in ts],
                ),
                "batch": (
                    lambda ts=ts, name=name: count_tokens_many(ts, encoding=name),
                    lambda ts=ts, enc=enc: enc.encode_ordinary_batch(ts),
                ),
            }
            for mode, (ours, theirs) in cases.items():
                t_ours, t_theirs = best_of(repeat, ours), best_of(repeat, theirs)
                rows.append(
                    {
                        "encoding": name,
                        "texts": f"{set_name} ({len(ts)} texts, {size / 1e6:.2f} MB)",
                        "mode": mode,
                        "ours_mb_s": size / t_ours / 1e6,
                        "tiktoken_mb_s": size / t_theirs / 1e6,
                        "ratio": t_theirs / t_ours,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best counts")
    args = parser.parse_args()
    import context_compactor._core as core

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, best of {args.repeat}\n")
    print("| encoding | texts | mode | context-compactor MB/s | tiktoken 0.14 MB/s | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for r in run(args.repeat):
        print(
            f"| {r['encoding']} | {r['texts']} | {r['mode']} | {r['ours_mb_s']:.1f} | "
            f"{r['tiktoken_mb_s']:.1f} | {r['ratio']:.2f}x |"
        )
    print()
    for name in ENCODINGS:
        print(f"first use of {name} (table built in a fresh interpreter): {first_use_ms(name):.1f} ms")
    so = Path(core.__file__)
    print(f"extension {so.name}: {so.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
