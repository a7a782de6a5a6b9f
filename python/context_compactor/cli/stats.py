"""``context-compactor stats FILE``: where a transcript's tokens go: by role, by tool, and the
largest messages."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from context_compactor import _core
from context_compactor.cli.common import FILE_HELP
from context_compactor.tokens import TokenCounter

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``stats`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "stats", help="where a transcript's tokens go: by role, by tool, largest messages"
    )
    p.add_argument("file", help=FILE_HELP)
    p.add_argument(
        "--format", choices=["openai", "anthropic", "responses"], default=None, help="force the message format"
    )
    p.add_argument("--tokenizer", default="approx", help="approx (default), o200k_base or cl100k_base (exact, offline)")
    p.add_argument("--top", type=int, default=10, help="how many of the largest messages to list")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


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
        kind = m.get("type")
        if kind is not None and kind != "message":
            # A Responses item: a call (``*_call``, by ``call_id``) or its output.
            if kind.endswith("_call_output") or kind.endswith("_output"):
                usage.setdefault(names.get(m.get("call_id", ""), "?"), [0, 0, 0])[2] += n
            elif kind.endswith("_call"):
                name = m.get("name") or kind.removesuffix("_call")
                names[m.get("call_id", "")] = name
                row = usage.setdefault(name, [0, 0, 0])
                row[0] += 1
                row[1] += n
            continue
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
    if content is None and message.get("type") not in (None, "message"):
        # A Responses item: its output, arguments, or (reasoning) its summary; opaque content is not shown.
        if message.get("type") == "reasoning":
            content = " ".join(str(p.get("text", "")) for p in message.get("summary") or [] if isinstance(p, dict))
        else:
            value = message.get("output", message.get("arguments", message.get("input", "")))
            content = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
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


def run(args: argparse.Namespace) -> int:
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
        # Responses items other than messages have a type, no role.
        kind = m.get("type")
        label = str(m.get("role")) if kind in (None, "message") else str(kind)
        row = by_role.setdefault(label, [0, 0])
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
            "largest": [
                {"index": i, "role": messages[i].get("role") or messages[i].get("type"), "tokens": per[i]}
                for i in largest
            ],
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
    out.write(f"\nlargest messages\n{'index':>6}  {'role':<22}{'tokens':>8}  preview\n")
    for i in largest:
        label = messages[i].get("role") or messages[i].get("type", "?")
        out.write(f"{i:>6}  {label:<22}{per[i]:>8,}  {_preview(messages[i])}\n")
    if problems:
        out.write(f"\n{len(problems)} problem(s) a provider would reject:\n")
        for p in problems[:10]:
            out.write(f"  {p}\n")
    return 0
