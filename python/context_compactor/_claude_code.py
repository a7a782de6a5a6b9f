"""Claude Code session logs (JSONL) rebuilt into a valid Anthropic request, for
:func:`context_compactor.io.load`: the records after the last compaction boundary, each API
assistant message put back together from its streamed records, every call given its result (a
synthetic one when the log never recorded it), and a note for each repair.

Split out of ``io.py`` (which reads the file and dispatches on its shape), as ``_codex.py`` holds
the Codex rollouts.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MISSING_START_TEXT", "NO_RESULT_TEXT", "rebuild_claude_code"]

#: Content of the synthetic result given to a call whose result the log never recorded.
NO_RESULT_TEXT = "(no result was recorded)"
#: Content of the user message put in front of a log that starts with the assistant.
MISSING_START_TEXT = "(the start of this conversation was not recorded)"
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


class _Assistant:
    """One API assistant message being put back together from its records."""

    __slots__ = ("blocks", "line", "seen")

    def __init__(self, line: int) -> None:
        self.line = line  # where its first record is, for the repair notes
        self.blocks: list[Any] = []
        self.seen: set[str] = set()


def _key(block: Any) -> str:
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


def _is_blank_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text") or "").strip()


def rebuild_claude_code(records: list[tuple[int, dict[str, Any]]]) -> tuple[list[dict[str, Any]], int, list[str]]:
    skipped = 0
    repairs: list[str] = []

    # Only what follows the last compaction boundary is in the live context.
    start = 0
    for i, (_, r) in enumerate(records):
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            start = i + 1
    if start == 0:  # A summary without its boundary record (older logs) also starts the context.
        for i, (_, r) in enumerate(records):
            if r.get("type") == "user" and r.get("isCompactSummary"):
                start = i
    skipped += start

    # Items in log order: ("assistant", _Assistant) or ("user", content, line).
    items: list[tuple[Any, ...]] = []
    by_message_id: dict[str, _Assistant] = {}
    call_ids: set[Any] = set()  # ids as the log has them (a str, unless the log is broken)
    results: dict[Any, tuple[int, dict[str, Any]]] = {}
    seen_uuids: set[str] = set()

    for n, r in records[start:]:
        kind = r.get("type")
        msg = r.get("message")
        if (
            kind not in ("user", "assistant")
            or r.get("isSidechain")
            or r.get("isApiErrorMessage")
            or not isinstance(msg, dict)
            or msg.get("role", kind) != kind
        ):
            skipped += 1
            continue
        uuid = r.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen_uuids:
                skipped += 1
                continue
            seen_uuids.add(uuid)
        content = msg.get("content")

        if kind == "assistant":
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                skipped += 1
                continue
            mid = msg.get("id")
            key = mid if isinstance(mid, str) else f"line {n}"
            group = by_message_id.get(key)
            if group is None:
                group = by_message_id[key] = _Assistant(n)
                items.append(("assistant", group))
            for b in blocks:
                k = _key(b)
                if k in group.seen:
                    continue  # the same block logged twice
                if _is_blank_text(b):
                    repairs.append(f"line {n}: dropped a blank text block")
                    continue
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    cid = b.get("id")
                    if cid in call_ids:
                        repairs.append(f"line {n}: dropped a second tool_use with id {cid!r}")
                        continue
                    call_ids.add(cid)
                group.seen.add(k)
                group.blocks.append(b)
            continue

        # user
        if isinstance(content, str):
            if content.strip():
                items.append(("user", content, n))
            else:
                skipped += 1
            continue
        if not isinstance(content, list):
            skipped += 1
            continue
        rest = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                rid = b.get("tool_use_id")
                if rid in results:
                    repairs.append(f"line {n}: dropped a second result for tool call {rid!r}")
                else:
                    results[rid] = (n, b)
            elif _is_blank_text(b):
                repairs.append(f"line {n}: dropped a blank text block")
            else:
                rest.append(b)
        if rest:
            items.append(("user", rest, n))
        elif not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            skipped += 1

    # Messages in log order, before results are placed: thinking first in each assistant message;
    # an assistant message of thinking alone (an interrupted turn) is not one the API takes back.
    staged: list[tuple[int, dict[str, Any]]] = []
    for item in items:
        if item[0] == "user":
            staged.append((item[2], {"role": "user", "content": item[1]}))
            continue
        group = item[1]
        thinking = [b for b in group.blocks if isinstance(b, dict) and b.get("type") in _THINKING_TYPES]
        others = [b for b in group.blocks if not (isinstance(b, dict) and b.get("type") in _THINKING_TYPES)]
        if not others:
            if thinking:
                repairs.append(f"line {group.line}: dropped an assistant message holding only thinking")
            continue
        if thinking and group.blocks[: len(thinking)] != thinking:
            repairs.append(f"line {group.line}: moved the thinking blocks to the front of their message")
        staged.append((group.line, {"role": "assistant", "content": thinking + others}))
    if staged and staged[0][1]["role"] != "user":
        staged.insert(0, (0, {"role": "user", "content": MISSING_START_TEXT}))
        repairs.append("the log starts with the assistant; added a user message in front")

    # Each assistant message, then the results of its calls in one user message.
    out: list[dict[str, Any]] = []
    used: set[Any] = set()
    for i, (line, m) in enumerate(staged):
        out.append(m)
        if m["role"] != "assistant":
            continue
        calls = [b.get("id") for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not calls or (i + 1 == len(staged) and not any(c in results for c in calls)):
            continue  # no calls, or the pending calls of the very last message: valid as they are
        block: list[Any] = []
        for c in calls:
            if c in results:
                block.append(results[c][1])
                used.add(c)
            else:
                block.append({"type": "tool_result", "tool_use_id": c, "content": NO_RESULT_TEXT, "is_error": True})
                repairs.append(f"line {line}: tool call {c!r} has no result in the log; added an error result")
        out.append({"role": "user", "content": block})

    for rid, (n, _) in results.items():
        if rid not in used:
            repairs.append(f"line {n}: dropped the result for tool call {rid!r}, whose call is not in the log")
    return out, skipped, repairs
