"""Peak memory, each case in a fresh interpreter (peak RSS: `ru_maxrss` / `VmHWM`).

    python benches/bench_memory.py [--json [PATH]]        # every case, one subprocess each
    python benches/bench_memory.py --case NAME            # one case here (prints JSON)

A case builds its input, notes the resident size then (current RSS from /proc/self/statm, and
the peak so far), resets the peak to the current RSS (`/proc/self/clear_refs`, so the build's
own temporaries cannot hide the operation's peak), runs one operation, and notes the peak
after. The peak is read as `VmHWM` from /proc/self/status: the figure `getrusage(RUSAGE_SELF)
.ru_maxrss` gives, without the parent's peak that `ru_maxrss` inherits across fork and exec
(the JSON keeps `ru_maxrss` too). "Extra peak" is the peak after the operation minus the RSS before it: what the
operation itself needed at its high point.
The input's own size is given two ways: its JSON in UTF-8, and what building it added to the
interpreter's RSS (the Python objects). The baseline interpreter is `python -c pass` plus
`import context_compactor`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

STRING_MB = 100
N_LARGE = 100_000


def ru_maxrss() -> int:
    """`getrusage(RUSAGE_SELF).ru_maxrss` in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def maxrss() -> int:
    """Peak RSS of this process image in bytes: `VmHWM` of /proc/self/status, which is what
    `ru_maxrss` reports except that `ru_maxrss` also keeps the peak of the process that forked
    this one (a big parent would hide every child's figure). Falls back to `ru_maxrss`."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return ru_maxrss()


def reset_peak() -> bool:
    """Reset the peak RSS to the current RSS (Linux >= 4.0), so that the input's build, whose
    temporaries are gone, does not hide the operation's peak. Whether it worked."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def rss() -> int:
    """Current RSS in bytes."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def big_string() -> str:
    """A 100 MB ASCII string: the corpus's ASCII tool output, repeated (a huge `cat` or log)."""
    import _data

    parts = [
        m["content"]
        for conv in _data.corpus().values()
        for m in conv
        if m.get("role") == "tool" and isinstance(m.get("content"), str) and m["content"].isascii()
    ]
    unit = "\n".join(parts)
    size = STRING_MB * 1_000_000
    reps, rest = divmod(size, len(unit))
    return "".join([unit] * reps + [unit[:rest]])  # one allocation of the result


def _conversation() -> tuple[Any, int]:
    import _data

    conv = _data.conversation(N_LARGE)
    return conv, _data.text_bytes(conv)


def _string() -> tuple[Any, int]:
    s = big_string()
    return s, len(s)


def _op(name: str) -> tuple[Callable[[], tuple[Any, int]], Callable[[Any], object] | None]:
    """(build the input, the operation on it) of a case."""
    import context_compactor as cc

    comp = cc.ContextCompactor()

    def lc_convert(conv: Any) -> object:
        from langchain_core.messages import convert_to_messages

        return convert_to_messages(conv)

    def base(fn: str) -> Callable[[Any], object]:
        import _baselines

        return lambda x: getattr(_baselines, fn)(x)

    cases: dict[str, tuple[Callable[[], tuple[Any, int]], Callable[[Any], object] | None]] = {
        "interpreter": (lambda: (None, 0), None),
        "100k/build": (_conversation, None),
        "100k/check": (_conversation, lambda c: comp.check(c)),
        "100k/check+state": (_conversation, lambda c: comp.check(c, state=cc.ConversationState())),
        "100k/micro_compact": (_conversation, lambda c: comp.micro_compact(c)),
        "100k/compact": (_conversation, lambda c: comp.compact(c)),
        "100k/python check": (_conversation, base("count_total")),
        "100k/python micro_compact": (_conversation, base("micro_compact")),
        "100k/langchain convert_to_messages": (_conversation, lc_convert),
        "100MB/build": (_string, None),
        "100MB/estimate_tokens": (_string, lambda s: cc.estimate_tokens(s)),
        "100MB/check": (_string, lambda s: comp.check([{"role": "user", "content": s}])),
        "100MB/python estimate": (_string, base("estimate")),
    }
    return cases[name]


CASES = (
    "interpreter",
    "100k/build",
    "100k/check",
    "100k/check+state",
    "100k/micro_compact",
    "100k/compact",
    "100k/python check",
    "100k/python micro_compact",
    "100k/langchain convert_to_messages",
    "100MB/build",
    "100MB/estimate_tokens",
    "100MB/check",
    "100MB/python estimate",
)


def run_case(name: str) -> dict[str, Any]:
    """Run one case in this process."""
    import gc

    out: dict[str, Any] = {"case": name, "bare_maxrss": maxrss()}
    import context_compactor  # noqa: F401

    out["import_maxrss"] = maxrss()
    build, op = _op(name)
    before_build = rss()
    data, size = build()
    gc.collect()
    out["input_bytes"] = size
    out["rss_before"] = rss()
    out["input_rss"] = out["rss_before"] - before_build
    out["build_maxrss"] = maxrss()
    out["peak_reset"] = reset_peak()
    out["maxrss_before"] = maxrss()
    if op is not None:
        result = op(data)
        out["maxrss_after"] = maxrss()
        out["extra_peak"] = out["maxrss_after"] - out["rss_before"]
        del result
    out["ru_maxrss_end"] = ru_maxrss()
    return out


def run_all(cases: tuple[str, ...] = CASES) -> list[dict[str, Any]]:
    """Every case in its own fresh interpreter."""
    results = []
    for name in cases:
        print(f"memory: {name} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [sys.executable, __file__, "--case", name], capture_output=True, text=True, check=False, timeout=1800
        )
        if proc.returncode != 0:
            results.append({"case": name, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1]})
        else:
            results.append(json.loads(proc.stdout))
    return results


def mb(b: float) -> str:
    return f"{b / 1e6:,.1f} MB" if abs(b) < 10e6 else f"{b / 1e6:,.0f} MB"


def table(results: list[dict[str, Any]]) -> str:
    by = {r["case"]: r for r in results}
    base = by.get("interpreter", {})
    floor = base.get("rss_before", 0) if "error" not in base else 0
    lines = [
        "| case | input: JSON UTF-8 / as Python objects | RSS before | peak after | extra peak | extra / input JSON "
        "| peak / interpreter with its input |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        if r["case"] == "interpreter":
            continue
        if "error" in r:
            lines.append(f"| {r['case']} | failed: {r['error']} | | | | | |")
            continue
        extra = r.get("extra_peak")
        peak = r.get("maxrss_after", r["maxrss_before"])
        ratio = f"{extra / r['input_bytes']:.3f}" if extra is not None and r["input_bytes"] else ""
        # The interpreter (after `import context_compactor`) plus its input, as the reference.
        vs = f"{peak / (floor + r['input_rss']):.2f}" if floor else ""
        lines.append(
            f"| {r['case']} | {mb(r['input_bytes'])} / {mb(r['input_rss'])} | {mb(r['rss_before'])} | {mb(peak)} | "
            f"{mb(extra) if extra is not None else ''} | {ratio} | {vs} |"
        )
    head = ""
    if base and "error" not in base:
        head = (
            f"Baseline interpreter: {mb(base['bare_maxrss'])} peak RSS bare, "
            f"{mb(base['rss_before'])} after `import context_compactor`.\n\n"
        )
    return head + "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=CASES, help="run one case in this process and print its JSON")
    p.add_argument("--json", nargs="?", const="-", default=None, help="JSON to stdout (alone) or to PATH")
    args = p.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    results = run_all()
    if args.json == "-":
        print(json.dumps(results, indent=2))
        return
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
