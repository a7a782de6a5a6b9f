"""``context-compactor replay FILE --max-tokens N``: feed a transcript into a Session as an agent
would and report each compaction, the cache-prefix stability and whether every context sent was
valid (:func:`context_compactor.replay.replay` does the work); ``--chart out.svg`` draws the
context size (:mod:`context_compactor._chart`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from context_compactor._chart import render_svg
from context_compactor.cli.common import (
    FILE_HELP,
    add_config_args,
    add_summarizer_args,
    load_config,
    summarizer_from_args,
    summarizer_label,
)
from context_compactor.compactor import ContextCompactor
from context_compactor.io import load
from context_compactor.replay import ReplayCompaction, replay

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``replay`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "replay", help="feed a transcript into a Session as an agent would and report each compaction"
    )
    p.add_argument("file", help=FILE_HELP)
    add_config_args(p)
    add_summarizer_args(p)
    p.add_argument("--chart", default=None, metavar="OUT.svg", help="write an SVG chart of the context size")
    p.add_argument("--store", default=":memory:", help="SQLite file to keep the replayed session in")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``context-compactor replay``; exit status 0 when every context was valid and inside the
    window, else 1."""
    transcript = load(args.file, format=args.format)
    config = load_config(args)
    compactor = ContextCompactor(config, summarizer=summarizer_from_args(args))
    out = sys.stdout
    if not args.json:
        summ = summarizer_label(args)
        out.write(
            f"{args.file}: {transcript.format}, {len(transcript.messages)} messages\n"
            f"window {config.max_context_tokens:,} tokens (reserve {config.reserve:,}, budget {config.budget:,}, "
            f"soft threshold {config.soft_threshold:,}, hard {config.hard_threshold:,}), "
            f"tokenizer {compactor.counter.name}, summarizer {summ}\n\n"
            f"{'#':>3}  {'message':>7}  {'tokens before → after':>24}  {'strategy':<13}{'facts kept':>10}\n"
        )
        out.flush()
    count = 0

    def show(c: ReplayCompaction) -> None:
        nonlocal count
        count += 1
        if args.json:
            return
        facts = f"{c.facts_kept}/{c.facts_total}" if c.facts_total else "-"
        flags = "  OVER BUDGET" if c.over_budget else ""
        flags += f"  fallback: {c.fallback_reason}" if c.fallback_reason else ""
        line = f"{count:>3}  {c.message_index:>7}  {c.tokens_before:>11,} → {c.tokens_after:<10,}  "
        # Clear a progress bar line before printing.
        if sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 79 + "\r")
        out.write(f"{line}{c.strategy:<13}{facts:>10}{flags}\n")
        out.flush()

    report = replay(transcript, compactor, store=args.store, progress=sys.stderr, on_compaction=show)
    if args.chart:
        with open(args.chart, "w", encoding="utf-8") as f:
            f.write(render_svg(report))
    if args.json:
        d = report.to_dict()
        d["turns"] = len(report.turns)
        d["invalid_turns"] = [asdict(t) for t in report.invalid_turns]
        d["inherited_turns"] = [asdict(t) for t in report.inherited_turns]
        d["over_window_turns"] = [
            {"message_index": t.message_index, "tokens": t.tokens, "over_by": t.over_by}
            for t in report.over_window_turns
        ]
        d["chart"] = args.chart
        print(json.dumps(d, ensure_ascii=False, indent=2))
        return 0 if report.valid else 1
    if not report.compactions:
        out.write("  (no compaction was needed)\n")
    ratio, stab, final = report.compaction_ratio, report.prefix_stability, report.final_ratio
    out.write("\n")
    out.write(
        f"compactions       {report.compaction_count} over {len(report.turns)} model calls"
        + (f", compaction ratio {ratio:.2f} (tokens after / before)" if ratio is not None else "")
        + "\n"
    )
    out.write(
        f"final context     {report.final_tokens:,} tokens"
        + (f" ({final:.1%} of the whole transcript's {report.transcript_tokens:,})" if final is not None else "")
        + "\n"
    )
    if stab is not None:
        out.write(
            f"cache-prefix      {stab:.1%} ({report.stable_turns}/{len(report.turns) - 1} calls start with "
            "the previous call's context unchanged)\n"
        )
    invalid, inherited = report.invalid_turns, report.inherited_turns
    out.write(
        f"valid contexts    {len(report.turns) - len(invalid) - len(inherited)}/{len(report.turns)}"
        + (f"; first problem at message {invalid[0].message_index}: {invalid[0].problems[0]}" if invalid else "")
        + "\n"
    )
    if inherited:
        out.write(
            f"                  {len(inherited)} invalid as in the transcript itself (uncompacted), e.g. before "
            f"message {inherited[0].message_index}: {inherited[0].problems[0]}\n"
        )
    over = report.over_window_turns
    if over:
        worst = max(over, key=lambda t: t.over_by)
        out.write(
            f"over the window   {len(over)} of {len(report.turns)} calls over the budget {config.budget:,} "
            f"(first before message {over[0].message_index}; worst {worst.tokens:,} tokens, +{worst.over_by:,}, "
            f"before message {worst.message_index})\n"
        )
    out.write(f"time              {report.seconds:.2f} s\n")
    if args.chart:
        out.write(f"chart             {args.chart}\n")
    return 0 if report.valid else 1
