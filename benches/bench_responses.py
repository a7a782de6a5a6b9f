"""check() on a 10k-item Responses conversation against the same conversation in Chat Completions form.

    python benches/bench_responses.py [--repeat N] [--items 10000] [--json [PATH]]

The Chat Completions conversation is `_data.conversation` (the corpus, repeated); the Responses
one is its conversion by `tests/_responses.py` (every tool call its own `function_call` item,
every result a `function_call_output`; with `--reasoning` also reasoning items with opaque
encrypted content before every second call turn, which adds text the chat form does not have),
cut to `--items` items; the chat form is the prefix of the chat conversation
that converts to exactly those items. Both are checked cold (default config, the "approx"
estimate), in one process, taking turns (`bench_tokens.timed_group`). Target: Responses within
1.3x of Chat Completions (the ratio printed is Responses time / Chat Completions time; lower is
better).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import _data
from _responses import to_responses as convert
from bench_tokens import emit, fmt_time, machine, markdown, note, parser, timed_group
from context_compactor import ContextCompactor, validate_messages

TARGET = 1.3


def pair(items: int, reasoning: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(chat messages, the same conversation as Responses items) with `items` items."""
    chat = _data.conversation(items)

    def to_responses(c: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return convert(c, reasoning=reasoning)

    # Cut the chat prefix that converts to at most `items` items, ending outside a tool block.
    lo, hi = 1, len(chat)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(to_responses(chat[:mid])) <= items:
            lo = mid
        else:
            hi = mid - 1
    cut = lo
    while cut > 1 and (chat[cut - 1].get("role") == "tool" or chat[cut - 1].get("tool_calls")):
        if chat[cut - 1].get("role") == "tool" and (cut == len(chat) or chat[cut].get("role") != "tool"):
            break
        cut -= 1
    chat = chat[:cut]
    resp = to_responses(chat)
    assert validate_messages(chat) == [] and validate_messages(resp) == []
    return chat, resp


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--items", type=int, default=10_000, help="Responses items in the conversation")
    p.add_argument(
        "--reasoning",
        action="store_true",
        help="also synthesize reasoning items (then the Responses form holds more text than the chat one)",
    )
    args = p.parse_args(argv)
    chat, resp = pair(args.items, args.reasoning)
    note(f"{len(resp)} Responses items, {len(chat)} chat messages")
    compactor = ContextCompactor()
    a = compactor.check(chat)
    b = compactor.check(resp)
    assert (a.format, b.format) == ("openai", "responses")
    t = timed_group({"chat": lambda: compactor.check(chat), "responses": lambda: compactor.check(resp)}, args.repeat)
    r = t["responses"]["best_s"] / t["chat"]["best_s"]
    verdict = f"{r:.2f}x ({'met' if r <= TARGET else 'MISSED'}, target <= {TARGET:g}x)"
    table = markdown(
        ["conversation", "items", "tokens (approx)", "check() best", "median"],
        [
            [
                "Chat Completions",
                len(chat),
                a.current_tokens,
                fmt_time(t["chat"]["best_s"]),
                fmt_time(t["chat"]["median_s"]),
            ],
            [
                "Responses items",
                len(resp),
                b.current_tokens,
                fmt_time(t["responses"]["best_s"]),
                fmt_time(t["responses"]["median_s"]),
            ],
        ],
    )
    emit(
        args,
        {"machine": machine(), "chat": t["chat"], "responses": t["responses"], "ratio": r, "target": TARGET},
        [table, f"Responses / Chat Completions: {verdict}"],
    )
    return 0 if r <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
