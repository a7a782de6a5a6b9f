"""``context-compactor compact FILE --max-tokens N``: compact a transcript and print a before/after
report (``--out`` writes the result)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from context_compactor import _core
from context_compactor.cli.common import (
    FILE_HELP,
    add_config_args,
    add_summarizer_args,
    load_config,
    summarizer_from_args,
)
from context_compactor.compactor import ContextCompactor

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``compact`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser("compact", help="compact a transcript and report before/after")
    p.add_argument("file", help=FILE_HELP)
    add_config_args(p)
    p.add_argument("--out", default=None, help="write the compacted conversation here (JSON)")
    add_summarizer_args(p, url=False)
    p.add_argument("--force", action="store_true", help="compact even below the thresholds (the /compact command)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from context_compactor.io import load, save

    transcript = load(args.file, format=args.format)
    config = load_config(args)
    summarizer = summarizer_from_args(args)
    compactor = ContextCompactor(config, summarizer=summarizer)
    t0 = time.perf_counter()
    result = compactor.compact(
        transcript.messages,
        system=transcript.system,
        tools=transcript.tools,
        format=transcript.format,
        force=args.force,
    )
    elapsed = time.perf_counter() - t0
    problems = _core.validate_messages(result.messages, format=transcript.format, system=result.system)
    text = json.dumps(result.messages, ensure_ascii=False, default=str)
    if result.system is not None:
        text += json.dumps(result.system, ensure_ascii=False, default=str)
    kept = sum(1 for f in result.must_keep if f in text)
    if args.out:
        save(args.out, result.messages, system=result.system, tools=transcript.tools, format=transcript.format)
    if args.json:
        report = {
            "file": str(args.file),
            "format": transcript.format,
            "strategy": result.strategy,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "max_context_tokens": config.max_context_tokens,
            "reserve_tokens": config.reserve,
            "budget": config.budget,
            "soft_threshold": config.soft_threshold,
            "messages_before": result.original_count,
            "messages_after": len(result.messages),
            "messages_replaced": result.compacted_count,
            "facts_kept": kept,
            "facts_total": len(result.must_keep),
            "must_keep_missing": list(result.must_keep_missing),
            "summary_truncated": result.summary_truncated,
            "over_budget": result.over_budget,
            "over_budget_reason": result.over_budget_reason,
            "fallback_reason": result.fallback_reason,
            "reason": result.reason,
            "repairs": list(result.repairs),
            "valid": not problems,
            "seconds": round(elapsed, 4),
            "out": args.out,
        }
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return 0 if not problems else 1
    out = sys.stdout
    out.write(f"{args.file}: {transcript.format}, {result.original_count} messages\n")
    out.write(
        f"window {config.max_context_tokens:,} tokens (reserve {config.reserve:,}, soft threshold "
        f"{config.soft_threshold:,}, target {config.target_tokens:,}), tokenizer {compactor.counter.name}\n\n"
    )
    saved = result.tokens_before - result.tokens_after
    pct = 100 * saved / result.tokens_before if result.tokens_before else 0.0
    out.write(f"strategy      {result.strategy}\n")
    out.write(f"tokens        {result.tokens_before:,} -> {result.tokens_after:,}  (saved {saved:,}, {pct:.1f}%)\n")
    out.write(
        f"messages      {result.original_count} -> {len(result.messages)}  "
        f"({result.compacted_count} replaced or removed)\n"
    )
    if result.must_keep:
        out.write(
            f"facts kept    {kept}/{len(result.must_keep)} (file paths, URLs, error names of the replaced part)\n"
        )
    for label, value in (
        ("phases", ", ".join(f"{p} {t:,}" for p, t in result.phases)),
        ("repairs", f"{len(result.repairs)}: " + "; ".join(result.repairs[:3]) if result.repairs else ""),
        ("fallback", result.fallback_reason or ""),
        ("over budget", result.over_budget_reason or ""),
        ("note", result.reason if result.strategy == "none" else ""),
    ):
        if value:
            out.write(f"{label:<14}{value}\n")
    out.write(f"valid         {'yes' if not problems else 'NO: ' + str(problems[0])}\n")
    out.write(f"time          {elapsed * 1000:.1f} ms\n")
    if result.summary:
        lines = result.summary.splitlines()
        out.write("\nsummary (first lines):\n")
        for line in lines[:12]:
            out.write(f"  {line}\n")
        if len(lines) > 12:
            out.write(f"  … ({len(lines) - 12} more lines)\n")
    if args.out:
        out.write(f"\nwrote {args.out}\n")
    return 0 if not problems else 1
