"""The ``context-compactor`` command line.

``context-compactor compact FILE --max-tokens N`` compacts a transcript and prints a before/after
report (``--out`` writes the result); ``context-compactor stats FILE`` prints where a transcript's
tokens go: by role, by tool, and the largest messages. Files are read with
:func:`context_compactor.io.load` (OpenAI JSON, Anthropic JSON, Claude Code session JSONL).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from context_compactor import _core
from context_compactor.batch_command import add_batch_parser
from context_compactor.compactor import ContextCompactor
from context_compactor.config import CompactionConfig
from context_compactor.errors import CompactorError, ConfigError
from context_compactor.replay import add_replay_parser
from context_compactor.tokens import TokenCounter

__all__ = ["main"]


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _tool_usage(
    messages: Sequence[dict[str, Any]], tokens: Sequence[int], counter: TokenCounter
) -> dict[str, list[int]]:
    """Per tool name: [calls, call tokens, result tokens] (results by the name of their call)."""
    names: dict[str, str] = {}
    usage: dict[str, list[int]] = {}
    for m, n in zip(messages, tokens, strict=True):
        calls: list[tuple[str, str, str]] = []
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or c.get("custom") or {}
            calls.append((c.get("id", ""), fn.get("name", "?"), fn.get("arguments", fn.get("input", "")) or ""))
        for b in _blocks(m):
            if isinstance(b, dict) and b.get("type") == "tool_use":
                calls.append((b.get("id", ""), b.get("name", "?"), json.dumps(b.get("input", {}), ensure_ascii=False)))
        for cid, name, args in calls:
            names[cid] = name
            row = usage.setdefault(name, [0, 0, 0])
            row[0] += 1
            row[1] += counter.count(args) + counter.count(name)
        if m.get("role") == "tool":
            name = names.get(m.get("tool_call_id", ""), "?")
            usage.setdefault(name, [0, 0, 0])[2] += n
        results = [b for b in _blocks(m) if isinstance(b, dict) and b.get("type") == "tool_result"]
        for b in results:
            name = names.get(b.get("tool_use_id", ""), "?")
            # A user message holding several results: share its tokens by the results' sizes.
            share = n * len(json.dumps(b.get("content"), ensure_ascii=False))
            total = sum(len(json.dumps(r.get("content"), ensure_ascii=False)) for r in results) or 1
            usage.setdefault(name, [0, 0, 0])[2] += share // total
    return usage


def _preview(message: dict[str, Any], width: int = 60) -> str:
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for b in _blocks(message):
            if isinstance(b, dict):
                parts.append(str(b.get("text") or b.get("thinking") or b.get("name") or b.get("type") or ""))
        text = " ".join(parts)
    if not text and message.get("tool_calls"):
        text = "→ " + ", ".join(c.get("function", {}).get("name", "?") for c in message["tool_calls"])
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_stats(args: argparse.Namespace) -> int:
    from context_compactor.io import load

    transcript = load(args.file, format=args.format)
    messages = transcript.messages
    counter = TokenCounter(args.tokenizer)
    counts = counter.count_each(messages, system=transcript.system, tools=transcript.tools, format=transcript.format)
    per = list(counts.messages)
    total = counts.total
    problems = _core.validate_messages(messages, format=transcript.format, system=transcript.system)
    structure = _core.analyze_conversation(messages, format=transcript.format)
    by_role: dict[str, list[int]] = {}
    if counts.system:
        by_role["system (separate)"] = [1, counts.system]
    for m, n in zip(messages, per, strict=True):
        row = by_role.setdefault(str(m.get("role")), [0, 0])
        row[0] += 1
        row[1] += n
    tools = _tool_usage(messages, per, counter)
    largest = sorted(range(len(messages)), key=lambda i: -per[i])[: args.top]

    if args.json:
        report = {
            "file": str(args.file),
            "format": transcript.format,
            "tokenizer": counter.name,
            "messages": len(messages),
            "total_tokens": total,
            "tools_tokens": counts.tools,
            "by_role": {r: {"messages": c, "tokens": t} for r, (c, t) in by_role.items()},
            "by_tool": {k: {"calls": c, "call_tokens": a, "result_tokens": r} for k, (c, a, r) in tools.items()},
            "largest": [{"index": i, "role": messages[i].get("role"), "tokens": per[i]} for i in largest],
            "tool_blocks": len(structure.tool_blocks),
            "turns": len(structure.turns),
            "pending_calls": structure.pending_calls,
            "problems": [{"index": p.index, "rule": p.rule, "message": p.message} for p in problems],
        }
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return 0

    pct = (lambda n: f"{100 * n / total:5.1f}%") if total else (lambda n: "    -")
    out = sys.stdout
    out.write(
        f"{args.file}: {transcript.format}, {len(messages)} messages, {len(structure.turns)} turns, "
        f"{len(structure.tool_blocks)} tool blocks ({structure.pending_calls} pending calls)\n"
    )
    out.write(f"total {total:,} tokens ({counter.name})")
    if counts.tools:
        out.write(f", of which tool definitions {counts.tools:,}")
    out.write("\n\n")
    out.write(f"{'by role':<20}{'messages':>9}{'tokens':>10}{'share':>8}\n")
    for role, (c, t) in sorted(by_role.items(), key=lambda kv: -kv[1][1]):
        out.write(f"{role:<20}{c:>9}{t:>10,}{pct(t):>8}\n")
    if tools:
        out.write(f"\n{'by tool':<20}{'calls':>9}{'args':>10}{'results':>10}{'share':>8}\n")
        for name, (c, a, r) in sorted(tools.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
            out.write(f"{name[:19]:<20}{c:>9}{a:>10,}{r:>10,}{pct(a + r):>8}\n")
    out.write(f"\nlargest messages\n{'index':>6}  {'role':<10}{'tokens':>8}  preview\n")
    for i in largest:
        out.write(f"{i:>6}  {messages[i].get('role', '?'):<10}{per[i]:>8,}  {_preview(messages[i])}\n")
    if problems:
        out.write(f"\n{len(problems)} problem(s) a provider would reject:\n")
        for p in problems[:10]:
            out.write(f"  {p}\n")
    return 0


def _load_config(args: argparse.Namespace) -> CompactionConfig:
    data: dict[str, Any] = {}
    if args.config:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ModuleNotFoundError:
                raise ConfigError("config: reading TOML needs Python 3.11+ or the tomli package", "config") from None
        with open(args.config, "rb") as f:
            data = tomllib.load(f)
        data = data.get("context_compactor", data)
    if args.max_tokens is not None:
        # No reserve given: the library's own rule (min(8000, window // 4)) or the preset's.
        data["max_context_tokens"] = args.max_tokens
    if args.keep_recent is not None:
        data["keep_recent_messages"] = args.keep_recent
    if args.tokenizer is not None:
        data["tokenizer"] = args.tokenizer
    return CompactionConfig.from_dict(data)


def _import_summarizer(spec: str) -> Callable[..., Any]:
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ConfigError(f"summarizer: expected module:function, got {spec!r}", "summarizer")
    sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), name)
    finally:
        sys.path.pop(0)
    if not callable(fn):
        raise ConfigError(f"summarizer: {spec} is not callable", "summarizer")
    return fn  # type: ignore[no-any-return]


def cmd_compact(args: argparse.Namespace) -> int:
    from context_compactor.io import load, save

    transcript = load(args.file, format=args.format)
    config = _load_config(args)
    summarizer = _import_summarizer(args.summarizer) if args.summarizer else None
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="context-compactor", description="Inspect and compact LLM-agent transcripts.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_core.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="where a transcript's tokens go: by role, by tool, largest messages")
    p.add_argument("file", help="OpenAI JSON, Anthropic JSON, or Claude Code session JSONL")
    p.add_argument("--format", choices=["openai", "anthropic"], default=None, help="force the message format")
    p.add_argument("--tokenizer", default="approx", help="approx (default), o200k_base or cl100k_base (exact, offline)")
    p.add_argument("--top", type=int, default=10, help="how many of the largest messages to list")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("compact", help="compact a transcript and report before/after")
    p.add_argument("file", help="OpenAI JSON, Anthropic JSON, or Claude Code session JSONL")
    p.add_argument("--max-tokens", type=int, default=None, help="the model's window (max_context_tokens)")
    p.add_argument("--config", default=None, help="a TOML file of CompactionConfig fields (or a preset = ...)")
    p.add_argument("--format", choices=["openai", "anthropic"], default=None, help="force the message format")
    p.add_argument("--out", default=None, help="write the compacted conversation here (JSON)")
    p.add_argument(
        "--summarizer", default=None, help="module:function taking a SummaryRequest (default: the rule summary)"
    )
    p.add_argument("--keep-recent", type=int, default=None, help="keep_recent_messages")
    p.add_argument("--tokenizer", default=None, help="approx (default), o200k_base or cl100k_base")
    p.add_argument("--force", action="store_true", help="compact even below the thresholds (the /compact command)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_compact)
    add_replay_parser(sub)
    add_batch_parser(sub)
    return parser


#: The exit status of a process ended by SIGPIPE (128 + 13), as ``head`` pipelines expect.
EXIT_BROKEN_PIPE = 141


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader went away, and Python flushes stdout again at exit
    (which would print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        # `context-compactor stats FILE | head -1`: the reader has what it wanted. Quiet, like a
        # process ended by SIGPIPE.
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (OSError, CompactorError, ValueError) as e:
        print(f"context-compactor: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
