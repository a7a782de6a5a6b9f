"""Token accounting against its baselines, in one run (issue 3's benchmark).

    python benches/bench_tokens.py [--repeat N] [--no-cargo] [--json [PATH]]

Prints markdown tables:

1. the estimate's speed: the Python call overhead, throughput through Python on corpus text,
   and the Rust core's own number (`cargo bench --bench estimate_throughput`, run here);
2. its accuracy per corpus group (`estimate_data.corpus_groups`) against exact o200k (tiktoken's
   `encode_ordinary`): sum(estimate)/sum(exact) and the p95 per-text error (len/4 for reference);
3. exact counting against Python tiktoken (`bench_exact.run`);
4. `ContextCompactor.check()` on a 10k-message conversation built from the corpus against a
   pure-Python implementation of the same estimate and framing (`_baselines.check`, identical
   counts, asserted): cold, and with a `ConversationState` after one appended message (the
   baseline, having no cache, counts the whole list again). Targets: >= 10x cold, >= 100x.

Timing: garbage collection off inside timed regions (as `timeit` does); each figure is the
best of N samples (the machine may be shared: the best is the least disturbed), the median is
in the JSON. Ours and the baselines take turns, one sample each per round, so both see the
same load; ratios compare figures of the same run.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _baselines as base
import _data

REPO = _data.REPO


# ---------------------------------------------------------------------------------------------
# Timing and tables (shared with bench_compact.py)
# ---------------------------------------------------------------------------------------------


def _calibrate(fn: Callable[[], object], min_sample_s: float) -> int:
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    return max(1, min(10_000, math.ceil(min_sample_s / max(once, 1e-9))))


def timed_group(
    fns: dict[str, Callable[[], object]],
    repeat: int,
    *,
    setup: Callable[[], object] | dict[str, Callable[[], object]] | None = None,
    min_sample_s: float = 0.02,
) -> dict[str, dict[str, float]]:
    """Seconds per call of each function: best and median of `repeat` samples, GC off while
    timing. The functions take turns, one sample each per round, so that ours and a baseline
    see the same load when the machine is shared (a ratio then compares like with like).

    Without `setup`, a sample runs its function enough times to last `min_sample_s`; with it,
    each sample is one call right after `setup()` (not timed; one per function when a dict).
    """
    setups = setup if isinstance(setup, dict) else {k: setup for k in fns} if setup is not None else {}
    number = {k: 1 if k in setups else _calibrate(fn, min_sample_s) for k, fn in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    enabled = gc.isenabled()
    gc.collect()
    try:
        for _ in range(repeat):
            for k, fn in fns.items():
                if k in setups:
                    setups[k]()
                n = number[k]
                gc.disable()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                samples[k].append((time.perf_counter() - t0) / n)
                if enabled:
                    gc.enable()
    finally:
        if enabled:
            gc.enable()
    return {
        k: {"best_s": min(v), "median_s": statistics.median(v), "samples": len(v), "calls_per_sample": number[k]}
        for k, v in samples.items()
    }


def fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def ratio(theirs: dict[str, float], ours: dict[str, float]) -> float:
    return theirs["best_s"] / ours["best_s"]


def markdown(headers: list[str], rows: list[list[Any]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(headers) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def verdict(value: float, target: float) -> str:
    return f"{value:.1f}x ({'met' if value >= target else 'MISSED'}, target {target:g}x)"


def machine() -> dict[str, Any]:
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    import context_compactor

    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "context_compactor": context_compactor.__version__,
        "platform": platform.platform(),
    }


def emit(args: argparse.Namespace, results: dict[str, Any], tables: list[str]) -> None:
    """Markdown to stdout, or JSON (`--json` alone: JSON to stdout instead; `--json PATH`: both)."""
    if args.json == "-":
        print(json.dumps(results, indent=2, default=str))
        return
    print("\n\n".join(tables))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
        print(f"\nJSON written to {args.json}")


def parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7, help="samples per measurement (best and median kept)")
    p.add_argument("--json", nargs="?", const="-", default=None, help="JSON to stdout (alone) or to PATH")
    return p


def note(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# check(): cold and with a ConversationState after one append (shared with bench_compact.py)
# ---------------------------------------------------------------------------------------------


def measure_check(
    convs: list[list[dict[str, Any]]], repeat: int, *, langchain: list[list[Any]] | None = None
) -> dict[str, Any]:
    """check() cold and after one append with a state, and the baselines, over `convs` (each
    conversation checked in turn; one timing covers them all).

    `langchain`: the same conversations as LangChain message objects (converted by the caller,
    untimed) to time `count_tokens_approximately` too. Appends go to every conversation.
    """
    from context_compactor import ContextCompactor, ConversationState

    comp = ContextCompactor()
    soft, hard = comp.config.soft_threshold, comp.config.hard_threshold
    base.learn_images(convs)  # untimed: the baseline counts images as the core does
    tokens = 0
    for conv in convs:
        ours = comp.check(conv)
        theirs = base.check(conv, soft, hard)
        assert ours.raw_tokens == theirs.tokens and ours.urgency == theirs.urgency, (ours, theirs)
        tokens += ours.raw_tokens

    def ours_cold() -> None:
        for conv in convs:
            comp.check(conv)

    def python_all() -> None:
        for conv in convs:
            base.check(conv, soft, hard)

    out: dict[str, Any] = {"messages": sum(map(len, convs)), "tokens": tokens}
    cold: dict[str, Callable[[], object]] = {"cold": ours_cold, "python_cold": python_all}
    if langchain is not None:
        from langchain_core.messages.utils import count_tokens_approximately

        def lc_count() -> None:
            for lc in langchain:
                count_tokens_approximately(lc)

        cold["langchain_cold"] = lc_count
    out.update(timed_group(cold, repeat))

    states = [ConversationState() for _ in convs]
    cached = [base.CachedCounter() for _ in convs]
    for conv, state, cache in zip(convs, states, cached, strict=True):
        comp.check(conv, state=state)
        cache.total(conv)
    step = [0]

    def append() -> None:
        new = []
        for conv in convs:
            step[0] += 1
            m = _data.new_message(10_000_000 + step[0])
            conv.append(m)
            new.append(m)
        if langchain is not None:
            from langchain_core.messages import convert_to_messages

            for lc, m in zip(langchain, new, strict=True):
                lc.extend(convert_to_messages([m]))

    def with_state() -> None:
        for conv, state in zip(convs, states, strict=True):
            comp.check(conv, state=state)

    def python_cached() -> None:
        for conv, cache in zip(convs, cached, strict=True):
            base.check(conv, soft, hard, cache)

    def with_state_checked() -> None:
        append()
        with_state()
        assert all(s.last_counted == 1 for s in states), [s.last_counted for s in states]

    with_state_checked()
    # The baselines after one append: without a cache, the whole list again (issue 6's "a
    # pure-Python check of the whole list"); for reference, a Python content-key cache.
    warm: dict[str, Callable[[], object]] = {
        "with_state": with_state,
        "python_after_append": python_all,
        "python_cached_after_append": python_cached,
    }
    if langchain is not None:
        warm["langchain_after_append"] = lc_count

    timed_calls = [0]

    def catch_up_then_append() -> None:
        # The timed call before this one counted exactly the one new message ...
        if timed_calls[0]:
            assert all(s.last_counted == 1 for s in states), [s.last_counted for s in states]
        timed_calls[0] += 1
        # ... and the other functions' samples appended messages since: count them untimed,
        # so that the next timed call counts exactly one new message (same for the Python cache).
        with_state()
        append()

    def catch_up_cache_then_append() -> None:
        python_cached()
        append()

    setups = {k: append for k in warm} | {
        "with_state": catch_up_then_append,
        "python_cached_after_append": catch_up_cache_then_append,
    }
    out.update(timed_group(warm, max(repeat, 9), setup=setups))
    assert all(s.last_counted == 1 for s in states), [s.last_counted for s in states]
    return out


# ---------------------------------------------------------------------------------------------
# The estimate: speed and accuracy
# ---------------------------------------------------------------------------------------------


def corpus_text() -> tuple[str, str]:
    """(all corpus message texts joined, the pure-ASCII ones joined)."""
    texts: list[str] = []
    for conv in _data.corpus().values():
        for m in conv:
            c = m.get("content")
            if isinstance(c, str):
                texts.append(c)
            elif isinstance(c, list):
                texts.extend(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
            for call in m.get("tool_calls") or ():
                texts.append(call["function"].get("arguments") or "")
    return "".join(texts), "".join(t for t in texts if t.isascii())


def cargo_throughput() -> dict[str, Any]:
    """Run `cargo bench --bench estimate_throughput` and parse its lines."""
    try:
        proc = subprocess.run(
            ["cargo", "bench", "--quiet", "--bench", "estimate_throughput"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["cargo bench failed"])[-1]}
    rows = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"(\w+)\s+(\w+)\s+(\d+) B\s+([\d.]+) GB/s", line)
        if m:
            rows[f"{m[1]}/{m[2]}"] = {"bytes": int(m[3]), "gb_s": float(m[4])}
    return {"rows": rows} if rows else {"error": "no result lines in cargo bench output"}


def estimate_speed(repeat: int, cargo: bool) -> dict[str, Any]:
    from context_compactor import estimate_tokens

    text, ascii_text = corpus_text()
    out: dict[str, Any] = {}
    short = "Fix the failing test in tests/test_config.py."
    out.update(
        timed_group(
            {
                "call_empty": lambda: estimate_tokens(""),
                "call_short": lambda: estimate_tokens(short),
                "python_call_short": lambda: base.estimate(short),
                "len4_call_short": lambda: len(short) // 4,
            },
            repeat,
        )
    )
    for name, t in (("ascii", ascii_text), ("all", text)):
        assert estimate_tokens(t) == base.estimate(t)
        size = len(t.encode("utf-8"))
        r = timed_group({"ours": lambda t=t: estimate_tokens(t), "python": lambda t=t: base.estimate(t)}, repeat)
        out[name] = {"bytes": size, **r}
    out["cargo"] = cargo_throughput() if cargo else {"error": "skipped (--no-cargo)"}
    return out


def p95(errors: list[float]) -> float:
    e = sorted(errors)
    return e[min(len(e) - 1, math.ceil(0.95 * len(e)) - 1)]


def accuracy() -> dict[str, Any]:
    from bench_exact import offline_tiktoken
    from context_compactor import estimate_tokens
    from estimate_data import corpus_groups

    enc = offline_tiktoken().get_encoding("o200k_base")
    out = {}
    for group, texts in corpus_groups(_data.corpus_dir()).items():
        exact = [len(x) for x in enc.encode_ordinary_batch(texts)]
        est = [estimate_tokens(t) for t in texts]
        len4 = [math.ceil(len(t) / 4) for t in texts]
        out[group] = {
            "texts": len(texts),
            "ratio": sum(est) / sum(exact),
            "p95": p95([abs(e - y) / y for e, y in zip(est, exact, strict=True)]),
            "mean": statistics.fmean((e - y) / y for e, y in zip(est, exact, strict=True)),
            "len4_ratio": sum(len4) / sum(exact),
            "len4_p95": p95([abs(e - y) / y for e, y in zip(len4, exact, strict=True)]),
        }
    return out


GROUP_NAMES = {
    "english": "English prose",
    "chinese": "Chinese prose",
    "mixed": "mixed prose",
    "tool_output": "tool output",
    "tool_args": "tool-call arguments",
}


def speed_table(s: dict[str, Any]) -> str:
    rows = [
        [
            "Python call overhead, `estimate_tokens('')`",
            fmt_time(s["call_empty"]["best_s"]),
            "",
            "",
        ],
        [
            "a 45-character string",
            fmt_time(s["call_short"]["best_s"]),
            fmt_time(s["python_call_short"]["best_s"]),
            f"{ratio(s['python_call_short'], s['call_short']):.1f}x",
        ],
    ]
    for name, label in (("ascii", "ASCII corpus text"), ("all", "all corpus text (CJK, emoji)")):
        r = s[name]
        mb = r["bytes"] / 1e6
        rows.append(
            [
                f"{label}, {mb:.2f} MB in one call",
                f"{mb / 1e3 / r['ours']['best_s']:.2f} GB/s",
                f"{mb / r['python']['best_s']:.0f} MB/s",
                f"{ratio(r['python'], r['ours']):.0f}x",
            ]
        )
    cargo = s["cargo"]
    if "rows" in cargo:
        for key, label in (
            ("ascii/latin1", "Rust core, ASCII text (1-byte layout, as Python stores it)"),
            ("ascii/utf8", "Rust core, ASCII text (UTF-8)"),
            ("all/ucs4", "Rust core, all corpus text (UCS-4, as Python stores it)"),
        ):
            if key in cargo["rows"]:
                rows.append([f"{label}, `cargo bench`", f"{cargo['rows'][key]['gb_s']:.2f} GB/s", "", ""])
    else:
        rows.append(["Rust core, `cargo bench --bench estimate_throughput`", f"not run: {cargo['error']}", "", ""])
    return "#### Estimate speed\n\n" + markdown(
        ["measurement", "context-compactor", "pure-Python estimate", "ratio"], rows
    )


def accuracy_table(a: dict[str, Any]) -> str:
    rows = []
    for g, r in a.items():
        ok = 1.0 <= r["ratio"] <= 1.10 and r["p95"] <= 0.25
        rows.append(
            [
                GROUP_NAMES.get(g, g),
                r["texts"],
                f"{r['ratio']:.3f}",
                f"{r['p95']:.1%}",
                "met" if ok else "MISSED",
                f"{r['len4_ratio']:.3f} / {r['len4_p95']:.0%}",
            ]
        )
    return (
        "#### Estimate accuracy on the corpus (texts >= 40 chars; exact = tiktoken o200k `encode_ordinary`)\n\n"
        + markdown(
            [
                "group",
                "texts",
                "sum(estimate)/sum(exact)",
                "p95 error",
                "target (1.00-1.10, <= 25%)",
                "len/4: ratio / p95",
            ],
            rows,
            "lrrrlr",
        )
    )


def exact_table(rows: list[dict[str, Any]] | dict[str, Any]) -> str:
    import tiktoken

    if isinstance(rows, dict):
        return "#### Exact counting vs Python tiktoken\n\nnot measured: `bench_exact.run` failed: " + rows["error"]

    body = [
        [
            r["encoding"],
            r["texts"],
            r["mode"],
            f"{r['ours_mb_s']:.1f}",
            f"{r['tiktoken_mb_s']:.1f}",
            f"{r['ratio']:.2f}x",
        ]
        for r in rows
    ]
    return "#### Exact counting (`count_tokens` / `count_tokens_many`) vs Python tiktoken\n\n" + markdown(
        ["encoding", "texts", "mode", "context-compactor MB/s", f"tiktoken {tiktoken.__version__} MB/s", "ratio"],
        body,
        "llllrr",
    )


def check_table(c: dict[str, Any], title: str) -> str:
    rows = [
        [
            "cold (no state)",
            fmt_time(c["cold"]["best_s"]),
            fmt_time(c["python_cold"]["best_s"]),
            verdict(ratio(c["python_cold"], c["cold"]), 10),
        ],
        [
            "after one append, with a `ConversationState`",
            fmt_time(c["with_state"]["best_s"]),
            fmt_time(c["python_after_append"]["best_s"]) + " (whole list again)",
            verdict(ratio(c["python_after_append"], c["with_state"]), 100),
        ],
        [
            "after one append, for reference: a Python content-key cache",
            fmt_time(c["with_state"]["best_s"]),
            fmt_time(c["python_cached_after_append"]["best_s"]),
            f"{ratio(c['python_cached_after_append'], c['with_state']):.1f}x (no target)",
        ],
    ]
    return f"#### {title}\n\n" + markdown(["check()", "context-compactor", "pure-Python, same estimate", "ratio"], rows)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--no-cargo", action="store_true", help="skip `cargo bench --bench estimate_throughput`")
    args = p.parse_args()
    results: dict[str, Any] = {"machine": machine(), "repeat": args.repeat}

    note("estimate speed ...")
    results["estimate_speed"] = estimate_speed(args.repeat, not args.no_cargo)
    note("estimate accuracy ...")
    results["accuracy"] = accuracy()
    note("exact counting vs tiktoken (bench_exact.run) ...")
    try:
        import bench_exact

        results["exact"] = bench_exact.run(max(3, args.repeat // 2))
    except Exception as e:  # bench_exact.py belongs to the exact tokenizer's work: report, go on
        results["exact"] = {"error": f"{type(e).__name__}: {e}".strip()}
    note("check() on 10k messages ...")
    conv = _data.conversation(10_000)
    results["check_10k"] = measure_check([conv], args.repeat)

    m = results["machine"]
    tables = [
        f"Python {m['python']}, {m['cpus']} CPUs, load average {m['load_avg_1_5_15']} at the start; "
        f"best of {args.repeat} samples.",
        speed_table(results["estimate_speed"]),
        accuracy_table(results["accuracy"]),
        exact_table(results["exact"]),
        check_table(
            results["check_10k"],
            f"check() on a 10k-message conversation from the corpus ({results['check_10k']['tokens']:,} tokens)",
        ),
    ]
    emit(args, results, tables)


if __name__ == "__main__":
    main()
