"""``context-compactor stats FILE``: where a transcript's tokens go: by role, by block kind, by
tool, and the largest messages.

Every figure comes from the Rust core's reading of the messages (:func:`_core.inspect_messages`:
each block's kind, tool name and tokens, a result named after the call it answers, and a
preview), so every format the core reads gets the same report: OpenAI, Anthropic, Responses
items (Codex rollouts), Gemini contents and framework objects. :func:`collect` is the report as
data, for any message list; :func:`run` prints it for a file.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from context_compactor import _core
from context_compactor.cli.common import FILE_HELP, add_format_arg
from context_compactor.tokens import TokenCounter

__all__ = ["Stats", "ToolUsage", "add_parser", "collect", "run"]

#: The label of the tokens each message adds for its role and separators (not in any block).
FRAMING = "(message framing)"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``stats`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "stats", help="where a transcript's tokens go: by role, block kind and tool, largest messages"
    )
    p.add_argument("file", help=FILE_HELP)
    add_format_arg(p)
    p.add_argument("--tokenizer", default="approx", help="approx (default), o200k_base or cl100k_base (exact, offline)")
    p.add_argument("--top", type=int, default=10, help="how many of the largest messages to list")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


@dataclass
class ToolUsage:
    """One tool's share: its calls and their tokens, the results that answer them and theirs."""

    calls: int = 0
    call_tokens: int = 0
    results: int = 0
    result_tokens: int = 0


@dataclass
class Stats:
    """Where a request's tokens go (see :func:`collect`).

    ``by_role`` maps a role (the core's: a Gemini ``model`` content is ``assistant``, a Responses
    output item ``tool``) to ``[messages, tokens]``; ``by_kind`` a block kind to ``[blocks,
    tokens]``, plus :data:`FRAMING` for the per-message overhead, so that its tokens add up to
    the messages' total; ``by_tool`` a tool name to its :class:`ToolUsage` (a result whose call
    is not in the list counts under ``"?"``); ``largest`` the indexes of the largest messages.
    """

    format: str
    tokenizer: str
    messages: list[_core.MessageInfo]
    total_tokens: int
    system_tokens: int
    tools_tokens: int
    structure: _core.ConversationStructure
    problems: list[_core.Problem]
    by_role: dict[str, list[int]] = field(default_factory=dict)
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    by_tool: dict[str, ToolUsage] = field(default_factory=dict)
    largest: list[int] = field(default_factory=list)

    def to_dict(self, file: str | None = None) -> dict[str, Any]:
        """The JSON report of ``stats --json``."""
        msgs = self.messages
        return {
            **({"file": file} if file is not None else {}),
            "format": self.format,
            "tokenizer": self.tokenizer,
            "messages": len(msgs),
            "total_tokens": self.total_tokens,
            "tools_tokens": self.tools_tokens,
            "by_role": {r: {"messages": c, "tokens": t} for r, (c, t) in self.by_role.items()},
            "by_kind": {k: {"blocks": c, "tokens": t} for k, (c, t) in self.by_kind.items()},
            "by_tool": {
                k: {
                    "calls": u.calls,
                    "call_tokens": u.call_tokens,
                    "results": u.results,
                    "result_tokens": u.result_tokens,
                }
                for k, u in self.by_tool.items()
            },
            "largest": [
                {"index": i, "role": msgs[i].role, "tokens": msgs[i].tokens, "preview": msgs[i].preview}
                for i in self.largest
            ],
            "tool_blocks": len(self.structure.tool_blocks),
            "turns": len(self.structure.turns),
            "pending_calls": self.structure.pending_calls,
            "problems": [{"index": p.index, "rule": p.rule, "message": p.message} for p in self.problems],
        }


def collect(
    messages: Sequence[Any],
    *,
    format: str | None = None,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    tokenizer: str | Callable[[str], int] = "approx",
    top: int = 10,
    preview_chars: int = 60,
) -> Stats:
    """The stats of a message list in any format the core reads (dicts or framework objects).

    Example:
        >>> s = collect([{"role": "user", "content": "列出 src/ 下的文件"}])
        >>> s.by_kind["text"], s.messages[0].preview
        ([1, 8], '列出 src/ 下的文件')
    """
    counter = TokenCounter(tokenizer)
    counts = counter.count_each(messages, system=system, tools=tools, format=format)
    infos = _core.inspect_messages(messages, format=counts.format, tokenizer=tokenizer, preview_chars=preview_chars)
    stats = Stats(
        format=counts.format,
        tokenizer=counter.name,
        messages=infos,
        total_tokens=counts.total,
        system_tokens=counts.system,
        tools_tokens=counts.tools,
        structure=_core.analyze_conversation(messages, format=counts.format),
        problems=_core.validate_messages(messages, format=counts.format, system=system),
    )
    if counts.system:
        stats.by_role["system (separate)"] = [1, counts.system]
    for m in infos:
        row = stats.by_role.setdefault(m.role, [0, 0])
        row[0] += 1
        row[1] += m.tokens
        framing = m.tokens
        for b in m.blocks:
            framing -= b.tokens
            kind = stats.by_kind.setdefault(b.kind, [0, 0])
            kind[0] += 1
            kind[1] += b.tokens
            if b.kind == "tool_call":
                usage = stats.by_tool.setdefault(b.name or "?", ToolUsage())
                usage.calls += 1
                usage.call_tokens += b.tokens
            elif b.kind == "tool_result":
                usage = stats.by_tool.setdefault(b.name or "?", ToolUsage())
                usage.results += 1
                usage.result_tokens += b.tokens
        if framing:
            row = stats.by_kind.setdefault(FRAMING, [0, 0])
            row[0] += 1
            row[1] += framing
    stats.largest = sorted(range(len(infos)), key=lambda i: -infos[i].tokens)[:top]
    return stats


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _cell(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns (with ``…``) and padded to them."""
    if _width(text) > width:
        while _width(text) > width - 1:
            text = text[:-1]
        text += "…"
    return text + " " * (width - _width(text))


def render(stats: Stats, name: str, out: TextIO) -> None:
    """The text report of ``stats`` (tables by role, block kind and tool; the largest messages)."""
    total = stats.total_tokens
    msgs = stats.messages
    s = stats.structure

    def pct(n: int) -> str:
        return f"{100 * n / total:5.1f}%" if total else "    -"

    # Tool names (MCP ones are long, some are Chinese) get the column they need, up to 40.
    tw = min(max([20, *(_width(t) + 1 for t in stats.by_tool)]), 40)
    out.write(
        f"{name}: {stats.format}, {len(msgs)} messages, {len(s.turns)} turns, "
        f"{len(s.tool_blocks)} tool blocks ({s.pending_calls} pending calls)\n"
    )
    out.write(f"total {total:,} tokens ({stats.tokenizer})")
    if stats.tools_tokens:
        out.write(f", of which tool definitions {stats.tools_tokens:,}")
    out.write("\n\n")
    out.write(f"{'by role':<20}{'messages':>9}{'tokens':>10}{'share':>8}\n")
    for role, (c, t) in sorted(stats.by_role.items(), key=lambda kv: -kv[1][1]):
        out.write(f"{role:<20}{c:>9}{t:>10,}{pct(t):>8}\n")
    out.write(f"\n{'by block kind':<20}{'blocks':>9}{'tokens':>10}{'share':>8}\n")
    for kind, (c, t) in sorted(stats.by_kind.items(), key=lambda kv: -kv[1][1]):
        out.write(f"{kind:<20}{c:>9}{t:>10,}{pct(t):>8}\n")
    if stats.by_tool:
        out.write(f"\n{_cell('by tool', tw)}{'calls':>9}{'args':>10}{'results':>10}{'share':>8}\n")
        for tool, u in sorted(stats.by_tool.items(), key=lambda kv: -(kv[1].call_tokens + kv[1].result_tokens)):
            out.write(
                f"{_cell(tool, tw - 1)} {u.calls:>9}{u.call_tokens:>10,}{u.result_tokens:>10,}"
                f"{pct(u.call_tokens + u.result_tokens):>8}\n"
            )
    out.write(f"\nlargest messages\n{'index':>6}  {'role':<12}{'tokens':>8}  preview\n")
    for i in stats.largest:
        out.write(f"{i:>6}  {msgs[i].role:<12}{msgs[i].tokens:>8,}  {msgs[i].preview}\n")
    if stats.problems:
        out.write(f"\n{len(stats.problems)} problem(s) a provider would reject:\n")
        for p in stats.problems[:10]:
            out.write(f"  {p}\n")


def run(args: argparse.Namespace) -> int:
    from context_compactor.io import load

    transcript = load(args.file, format=args.format)
    stats = collect(
        transcript.messages,
        format=transcript.format,
        system=transcript.system,
        tools=transcript.tools,
        tokenizer=args.tokenizer,
        top=args.top,
    )
    if args.json:
        print(json.dumps(stats.to_dict(str(args.file)), ensure_ascii=False, indent=2))
    else:
        render(stats, str(args.file), sys.stdout)
    return 0
