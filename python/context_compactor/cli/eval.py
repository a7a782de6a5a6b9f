"""``context-compactor eval FILES... [--max-tokens N | --window-ratio R] [--summarizer ...]
[--baseline CONFIG.toml] [--canaries] [--json] [--html report.html]``: what the agent keeps through
compaction and what it pays (:func:`context_compactor.eval.evaluate` does the work; the HTML
report is :mod:`context_compactor._html_report`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from context_compactor.cli.common import add_summarizer_args, load_config, read_toml, summarizer_from_args
from context_compactor.config import CompactionConfig
from context_compactor.eval import PROBES, EvalReport, evaluate
from context_compactor.eval.canaries import KINDS, POSITIONS
from context_compactor.eval.planted import ROUNDS, below, survival

__all__ = ["add_parser", "print_table", "run"]

_SHORT = {"recall": "recall", "artifact_trail": "artifacts", "constraints": "constraints",
          "continuation": "continue", "growth": "growth"}  # fmt: skip


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``eval`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "eval", help="score what compaction keeps (recall, artifacts, constraints, …) and what the calls cost"
    )
    p.add_argument("files", nargs="+", help="transcripts (OpenAI JSON, Anthropic JSON, Claude Code JSONL)")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--max-tokens", type=int, default=None, help="the window (max_context_tokens) for every file")
    window.add_argument(
        "--window-ratio", type=float, default=None, help="the window as a share of each transcript's tokens (0.1)"
    )
    p.add_argument("--config", default=None, help="the policy's TOML config (default: the library's defaults)")
    p.add_argument("--baseline", default=None, metavar="CONFIG.toml", help="a config to compare with, run the same way")
    p.add_argument("--tokenizer", default=None, help="approx (default), o200k_base or cl100k_base")
    add_summarizer_args(p)
    p.add_argument(
        "--canaries",
        action="store_true",
        help="also replay copies with canaries planted (policy, baseline, defaults): survival per kind, "
        "position, compaction and transcript",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--html", default=None, metavar="REPORT.html", help="write a static HTML report with charts")
    p.set_defaults(func=run)
    return p


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _aligned(rows: list[list[str]], *, left: int = 2, gap: str = "  ") -> list[str]:
    """The rows as lines of columns as wide as their widest cell: the first ``left`` columns
    left-aligned (names), the rest right-aligned (figures), ``gap`` between every two."""
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i]) if i < left else c.rjust(widths[i]) for i, c in enumerate(r)]
        lines.append(gap.join(cells).rstrip())
    return lines


def print_table(report: EvalReport, out: TextIO) -> None:
    """The per-transcript and overall tables, in one set of aligned columns (a cell is as wide
    as it needs: names and figures are never cut or run together)."""
    pols = [p for p in report.policies if p in ("policy", "baseline")]
    planted = report.canary_policies
    head = ["transcript", "policy", *(_SHORT[p] for p in PROBES), *(["canaries"] if planted else [])]
    head += ["calls", "compact", "changed", "loops", "prefix"]
    head += [f"$ {k}" for k in report.prices]
    rows: list[list[str]] = [head]
    notes: dict[int, str] = {}  # row -> a note after its last column
    for t in report.transcripts:
        name = t.file.rsplit("/", 1)[-1]
        for pol in (*report.policies, *(p for p in planted if p not in report.policies)):
            r = t.runs.get(pol)
            if r is None:
                if pol in t.canaries:  # a policy replayed only planted (the defaults beside a --config)
                    rows.append([name, pol, *([""] * len(PROBES)), _canary_cell(t, pol)])
                    name = ""
                continue
            row = [name, pol]
            for p in PROBES:
                s = r.probes[p]
                cell = f"{_pct(s.share)} {s.kept}/{s.total}" if s.total else "-"
                row.append(cell if pol in pols else "")
            if planted:
                row.append(_canary_cell(t, pol))
            row += [str(len(r.tokens)), str(r.compactions)]
            row += [_pct(r.changed_share), str(r.loops)] if pol in pols else ["", ""]
            row += [_pct(r.prefix_stability)]
            row += [f"{r.cost.get(k, 0.0):.4f}" for k in report.prices]
            if not r.fits:
                notes[len(rows)] = "(over the window)"
            rows.append(row)
            name = ""
    overall = len(rows)
    for pol in (*report.policies, *(p for p in planted if p not in report.policies)):
        if pol not in report.policies:
            rows.append(["", pol, *([""] * len(PROBES)), _pct(report.canary_survival(pol)["share"])])
            continue
        o = report.overall(pol)
        row = ["", pol, *(_pct(o[p]) if pol in pols else "" for p in PROBES)]
        if planted:
            row.append(_pct(report.canary_survival(pol)["share"]) if pol in planted else "")
        row += ["", str(o["compactions"])]
        row += [_pct(o["changed_share"]), str(o["loop_transcripts"])] if pol in pols else ["", ""]
        row += [_pct(o["prefix_stability"]) if pol in pols else ""]
        row += [f"{o['cost'][k]:.4f}" for k in report.prices]
        rows.append(row)
    lines = [line + (f"  {notes[i]}" if i in notes else "") for i, line in enumerate(_aligned(rows))]
    out.write("\n".join(lines[:overall]) + "\n")
    out.write("\noverall\n" + "\n".join(lines[overall:]) + "\n")
    silent = ", ".join(f"{p} {report.overall(p)['silent_facts']}" for p in pols)
    out.write(f"must-keep facts missing and not in must_keep_missing (fact x compaction): {silent}\n")
    targets = ", ".join(f"{p} {t:.2f}" for p in pols if (t := report.overall(p)["mean_target"]) is not None)
    if targets:
        out.write(f"mean target ratio over the compactions: {targets}\n")
    loops = ", ".join(f"{p} {report.overall(p)['loop_transcripts']}" for p in pols)
    out.write(
        "transcripts where calls compact again within 3 calls of an over_budget or refused compaction "
        f"without crossing the hard threshold: {loops}\n"
    )
    if "baseline" in report.policies:
        a, b = report.overall("policy"), report.overall("baseline")
        for k in report.prices:
            if b["cost"][k]:
                out.write(f"cost vs baseline ({k}): {a['cost'][k] / b['cost'][k] - 1:+.1%}\n")
    if planted:
        print_canaries(report, out)
    for f, why in report.skipped:
        out.write(f"skipped {f}: {why}\n")


def _canary_cell(t: Any, pol: str) -> str:
    run = t.canaries.get(pol)
    if run is None:
        return ""
    s = survival([run])
    kept, said = s["items"]
    return f"{_pct(s['share'])} {kept}/{said}" if said else "-"


def print_canaries(report: EvalReport, out: TextIO) -> None:
    """Canary survival per policy (planted copies replayed the same way): every compaction, the
    compactions one by one, per kind and position, silent losses, the mean target."""
    rows = [
        ["policy", "all", *(f"c{k}" for k in range(1, ROUNDS + 1)), *KINDS, *POSITIONS, "silent", "compact", "target"]
    ]
    for pol in report.canary_policies:
        s = report.canary_survival(pol)
        row = [pol, f"{_pct(s['share'])} {s['items'][0]}/{s['items'][1]}", *map(_pct, s["by_round"])]
        row += [_pct(s["by_kind"][k]) for k in KINDS] + [_pct(s["by_position"][p]) for p in POSITIONS]
        t = s["mean_target"]
        row += [str(s["silent"]), str(s["compactions"]), "-" if t is None else f"{t:.2f}"]
        rows.append(row)
    out.write(
        "\ncanary survival: copies with 15 canaries each (5 kinds x top/middle/bottom) replayed per policy at the "
        "same window; all = every compaction, c1-c5 = the first five compactions\n"
    )
    out.write("\n".join(_aligned(rows, left=1)) + "\n")
    if "baseline" in report.canary_policies:
        names = [t.file.rsplit("/", 1)[-1] for t in below(report.transcripts)]
        out.write(
            "transcripts (20+ canary items) where the policy keeps fewer canaries than the baseline: "
            f"{len(names)}{': ' + ', '.join(names) if names else ''}\n"
        )
    for pol in report.canary_policies:
        for e in report.canary_survival(pol)["errors"]:
            out.write(f"canary replay failed ({pol}): {e}\n")


def run(args: argparse.Namespace) -> int:
    """Run ``context-compactor eval``: 0 when every context sent was valid, else 1."""
    config = load_config(args, max_tokens=args.max_tokens)
    baseline: CompactionConfig | None = None
    if args.baseline:
        data = read_toml(args.baseline)
        if args.tokenizer is not None:
            data["tokenizer"] = args.tokenizer
        baseline = CompactionConfig.from_dict(data)
    report = evaluate(
        args.files,
        max_tokens=args.max_tokens,
        window_ratio=args.window_ratio,
        config=config,
        baseline=baseline,
        summarizer=summarizer_from_args(args),
        progress=sys.stderr if sys.stderr.isatty() else None,
        canaries=args.canaries,
    )
    if args.html:
        from context_compactor._html_report import render_html

        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(report))
    if args.json:
        d = report.to_dict()
        d["html"] = args.html
        print(json.dumps(d, ensure_ascii=False, indent=2))
    else:
        print_table(report, sys.stdout)
        if args.html:
            print(f"\nwrote {args.html}")
    ok = all(r.valid is not False for t in report.transcripts for k, r in t.runs.items() if k in ("policy", "baseline"))
    return 0 if ok else 1
