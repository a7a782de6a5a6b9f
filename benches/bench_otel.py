"""What telemetry costs: check() and compact() in µs per call, in one run (issue 29).

    python benches/bench_otel.py [--rounds 5] [--json PATH]

Three cases, each in its own interpreter, taking turns round by round (so that all see the same
load on a shared machine):

* ``absent``: a separate venv without opentelemetry (``target/bench-otel/venv``, made here with
  ``python -m venv`` from the same interpreter; it imports this checkout's built package through
  ``PYTHONPATH``, copied to ``target/bench-otel/pkg``), so ``import opentelemetry`` fails.
* ``no-sdk``: the project's venv: the API installed, no SDK configured (the tracer hands back
  non-recording spans).
* ``sdk``: the SDK configured, spans to an in-memory exporter (a SimpleSpanProcessor), the
  counter to an in-memory metric reader.

Each round, each case runs once: best of 7 samples of each call (GC off while timing), in process
CPU time (``time.process_time``: the time the machine's other jobs take the core is not counted). The
figures are the best over the rounds (the least disturbed); the noise is the spread (max/min - 1) of ``absent``'s
figures over the rounds. ``no-sdk`` is "within noise" when its figure differs from ``absent``'s
by no more than that spread. Across interpreters a loaded machine's noise is large, so the API's
cases also measure in their own process: the hook alone (``telemetry.compact`` around a drive
that returns at once, minus that drive), and ``compact()`` with the hook switched off
(``TRACER = None``, the very path taken without the API) against on, samples alternating.

Calls: ``check()`` of an 80-message conversation (no telemetry: the control), ``compact()``
of the same conversation below the thresholds (nothing to do: the per-call overhead shows most),
and ``compact(force=True)`` (the rule summary: a compaction the span describes in full).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "target" / "bench-otel"
CALLS = ("check", "compact (nothing to do)", "compact (rule summary)")
CASES = ("absent", "no-sdk", "sdk")


def conversation(turns: int = 39) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    msgs.append({"role": "user", "content": "Fix the failing test in /srv/app/billing/tax.py. Keep the API."})
    for i in range(turns):
        cid = f"call_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: reading the next module. " * 5,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"cmd": "cat f{i}.py"}}'},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"line {i}: total = round(x, 2)\n" * 40})
    return msgs


def best(fn: Callable[[], object], samples: int = 7, min_s: float = 0.05) -> float:
    t0 = time.process_time()
    fn()
    once = max(time.process_time() - t0, 1e-7)
    n = max(1, min(20_000, int(min_s / once)))
    out = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(samples):
            t0 = time.process_time()
            for _ in range(n):
                fn()
            out.append((time.process_time() - t0) / n)
    finally:
        gc.enable()
    return min(out)


def worker(case: str) -> None:
    """One case's figures, as JSON on stdout (µs per call)."""
    clear: Callable[[], object] = lambda: None  # noqa: E731
    if case == "sdk":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        clear = exporter.clear
    from context_compactor import ContextCompactor, telemetry

    assert (case != "absent") == telemetry.AVAILABLE, (case, telemetry.AVAILABLE)
    msgs = conversation()
    c = ContextCompactor(max_context_tokens=200_000)
    small = ContextCompactor(max_context_tokens=12_000, reserve_tokens=1_000)
    assert c.compact(msgs).strategy == "none"
    assert small.compact(msgs, force=True).strategy == "rule_summary"
    if case == "sdk":
        clear()
        small.compact(msgs, force=True)
        (span,) = exporter.get_finished_spans()
        assert span.name == telemetry.SPAN_NAME and span.attributes and span.attributes["context_compactor.strategy"]
    fns: dict[str, Callable[[], object]] = {
        "check": lambda: c.check(msgs),
        "compact (nothing to do)": lambda: c.compact(msgs),
        "compact (rule summary)": lambda: small.compact(msgs, force=True),
    }
    out = {}
    for name, fn in fns.items():
        out[name] = best(fn) * 1e6
        clear()
    if case != "absent":
        # The same process, the same load: the hook's own cost, and compact() with the hook off
        # (TRACER = None is exactly the path taken without the API) against on, samples alternating.
        done = c.compact(msgs)
        out["hook alone"] = (best(lambda: telemetry.compact(c, lambda s: done, None, False)) - best(lambda: done)) * 1e6
        tracer = telemetry.TRACER

        def off() -> object:
            telemetry.TRACER = None
            return c.compact(msgs)

        def on() -> object:
            telemetry.TRACER = tracer
            return c.compact(msgs)

        a, b = alternating(off, on)
        telemetry.TRACER = tracer
        out["in-process on / off"] = b / a
        clear()
    print(json.dumps(out))


def alternating(fa: Callable[[], object], fb: Callable[[], object], samples: int = 21) -> tuple[float, float]:
    """Best seconds per call of ``fa`` and ``fb``, their samples alternating."""
    fa()
    fb()
    t0 = time.process_time()
    fa()
    n = max(1, min(20_000, int(0.05 / max(time.process_time() - t0, 1e-7))))
    out: tuple[list[float], list[float]] = ([], [])
    gc.collect()
    gc.disable()
    try:
        for _ in range(samples):
            for fn, acc in ((fa, out[0]), (fb, out[1])):
                t0 = time.process_time()
                for _ in range(n):
                    fn()
                acc.append((time.process_time() - t0) / n)
    finally:
        gc.enable()
    return min(out[0]), min(out[1])


def absent_python() -> tuple[str, dict[str, str]]:
    """The interpreter of a venv without opentelemetry, and the environment that imports this
    checkout's build from a copy of the package."""
    import context_compactor

    venv = WORK / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    if not (venv / "bin" / "python").exists():
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    pkg = WORK / "pkg"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(Path(context_compactor.__file__).parent, pkg / "context_compactor")
    python = str(venv / "bin" / "python")
    env = {**os.environ, "PYTHONPATH": str(pkg)}
    env.pop("VIRTUAL_ENV", None)
    probe = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('opentelemetry') is None)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert probe.stdout.strip() == "True", "the bench venv must not have opentelemetry"
    return python, env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", choices=CASES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    WORK.mkdir(parents=True, exist_ok=True)
    absent, absent_env = absent_python()
    runs = {
        "absent": ([absent, __file__, "--worker", "absent"], absent_env),
        "no-sdk": ([sys.executable, __file__, "--worker", "no-sdk"], dict(os.environ)),
        "sdk": ([sys.executable, __file__, "--worker", "sdk"], dict(os.environ)),
    }
    figures: dict[str, dict[str, list[float]]] = {case: {} for case in CASES}
    for r in range(args.rounds):
        for case in CASES:
            cmd, env = runs[case]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=WORK)
            if out.returncode != 0:
                sys.exit(f"{case}: {out.stderr}")
            for call, us in json.loads(out.stdout).items():
                figures[case].setdefault(call, []).append(us)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {case: {call: min(v) for call, v in calls.items()} for case, calls in figures.items()}
    noise = {call: max(figures["absent"][call]) / min(figures["absent"][call]) - 1 for call in CALLS}
    print(f"\nPython {sys.version.split()[0]}, {args.rounds} rounds, best of each case's best-of-7 (µs per call)\n")
    print("| call | API absent | API, no SDK | SDK, in-memory | no SDK / absent | noise (absent) | SDK / absent |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    verdicts = []
    for call in CALLS:
        a, n, s = med["absent"][call], med["no-sdk"][call], med["sdk"][call]
        within = abs(n / a - 1) <= noise[call]
        verdicts.append((call, within))
        print(f"| {call} | {a:.1f} | {n:.1f} | {s:.1f} | {n / a:.3f} | ±{noise[call] * 100:.1f}% | {s / a:.2f} |")
    print()
    for call, within in verdicts:
        print(f"{call}: no SDK {'within' if within else 'OUTSIDE'} the noise of absent")
    print()
    for case in ("no-sdk", "sdk"):
        hook = statistics.median(figures[case]["hook alone"])
        ab = statistics.median(figures[case]["in-process on / off"])
        print(
            f"{case}: the hook alone {hook:.2f} µs per compact(); compact() (nothing to do) with the hook on / off "
            f"in one process, samples alternating: {ab:.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"figures": figures, "median": med, "noise": noise}, indent=2))


if __name__ == "__main__":
    main()
