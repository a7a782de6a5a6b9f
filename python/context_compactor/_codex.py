"""Codex CLI rollout files (``~/.codex/sessions/**/rollout-*.jsonl``) rebuilt into the list of
Responses items Codex would send next.

Two layouts exist (both read here, told apart line by line):

- **Older** (Codex CLI 2025, the real 1,370-line session in the shared corpus): the first line
  is a header ``{"id", "timestamp", "instructions", "git"}``; every later line is a bare
  Responses item (``message``, ``reasoning``, ``function_call``, ``function_call_output``, ...)
  or a ``{"record_type": "state"}`` bookkeeping line.
- **Current** (codex-rs ``RolloutLine``: ``{"timestamp", "type", "payload"}`` with
  ``RolloutItem`` tagged ``session_meta`` | ``response_item`` | ``compacted`` | ``turn_context``
  | ``event_msg``): only ``response_item`` payloads are model input. ``event_msg`` lines are UI
  events (they repeat the user and agent messages), ``turn_context`` and ``session_meta`` are
  settings; all are skipped and counted. A ``compacted`` line is a checkpoint: like Codex's
  ``reconstruct_history_from_rollout``, the items it carries in ``replacement_history`` replace
  everything before it; one without them (older Codex) keeps the user messages seen so far and
  adds its ``message`` (the summary) as a user message.

Rebuilt as :func:`context_compactor.io.load` rebuilds Claude Code logs (each change listed in
``repairs``): ``ghost_snapshot`` items (Codex's undo bookkeeping, never sent) and ``system``
messages are skipped; a result whose call is nowhere is dropped; a repeated ``call_id`` keeps its
first call and its first result; a result written before its call moves right after it; a call
with no result gets a synthetic one (``NO_RESULT_TEXT``) right after it, unless it is still
pending at the end of the log; a ``reasoning`` item with no item after it (an interrupted turn)
is dropped, since the provider rejects reasoning without its following item. Kept items are the
file's JSON objects, unchanged (reasoning keeps its ``encrypted_content`` byte for byte).
"""

from __future__ import annotations

from typing import Any

#: Call item types and the result type Codex answers each with (``local_shell_call`` results are
#: written as ``function_call_output`` by Codex itself).
CALL_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "function_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
    "tool_search_call": "tool_search_call_output",
}
RESULT_TYPES = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "computer_call_output",
        "tool_search_call_output",
    }
)
#: Items Codex records that are never sent to the model.
NOT_SENT = frozenset({"ghost_snapshot"})
ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})


def is_rollout(records: list[tuple[int, Any]]) -> bool:
    """Whether JSONL records are a Codex rollout (either layout)."""
    if not records:
        return False
    first = records[0][1]
    if not isinstance(first, dict):
        return False
    if first.get("type") in ROLLOUT_TYPES and "payload" in first:
        return True
    # The older layout: a header with the session id and instructions, then bare items.
    return (
        "id" in first
        and "timestamp" in first
        and "type" not in first
        and "role" not in first
        and any(isinstance(r, dict) and (r.get("record_type") == "state" or "type" in r) for _, r in records[1:])
    )


def rebuild(records: list[tuple[int, dict[str, Any]]]) -> tuple[list[dict[str, Any]], str | None, int, list[str]]:
    """The Responses items of a rollout, its instructions, the records skipped and the repairs."""
    items: list[tuple[int, dict[str, Any]]] = []
    instructions: str | None = None
    skipped = 0
    repairs: list[str] = []
    for n, r in records:
        kind = r.get("type")
        if "payload" in r and kind in ROLLOUT_TYPES:
            payload = r.get("payload")
            if kind == "response_item" and isinstance(payload, dict):
                items.append((n, payload))
            elif kind == "compacted" and isinstance(payload, dict):
                items = _after_compaction(items, payload, n)
            elif kind == "session_meta" and isinstance(payload, dict):
                instructions = _instructions(payload) or instructions
                skipped += 1
            else:
                skipped += 1
        elif "type" in r and "record_type" not in r:
            items.append((n, r))
        elif n == records[0][0] and "id" in r:
            text = r.get("instructions")
            instructions = text if isinstance(text, str) and text.strip() else None
            skipped += 1
        else:
            skipped += 1  # {"record_type": "state"} and other bookkeeping
    kept: list[tuple[int, dict[str, Any]]] = []
    for n, it in items:
        if it.get("type") in NOT_SENT or (it.get("type") == "message" and it.get("role") == "system"):
            skipped += 1
            continue
        kept.append((n, it))
    return _pair(kept, repairs), instructions, skipped, repairs


def _instructions(meta: dict[str, Any]) -> str | None:
    base = meta.get("base_instructions")
    if isinstance(base, dict):
        base = base.get("text")
    text = base if isinstance(base, str) else meta.get("instructions")
    return text if isinstance(text, str) and text.strip() else None


def _after_compaction(
    items: list[tuple[int, dict[str, Any]]], compacted: dict[str, Any], line: int
) -> list[tuple[int, dict[str, Any]]]:
    history = compacted.get("replacement_history")
    if isinstance(history, list):
        return [(line, it) for it in history if isinstance(it, dict)]
    # Older Codex: the user messages so far, then the summary as a user message.
    users = [(n, it) for n, it in items if it.get("type") == "message" and it.get("role") == "user"]
    summary = compacted.get("message")
    if isinstance(summary, str) and summary.strip():
        users.append((line, _user_text(summary)))
    return users


def _user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _pair(items: list[tuple[int, dict[str, Any]]], repairs: list[str]) -> list[dict[str, Any]]:
    """Every result right after its call's place, orphans and duplicates dropped, missing results
    made up (but for calls still pending at the end), trailing reasoning dropped."""
    calls: dict[str, int] = {}
    results: dict[str, dict[str, Any]] = {}
    result_lines: dict[str, int] = {}
    for n, it in items:
        cid = it.get("call_id")
        if not isinstance(cid, str):
            continue
        if it.get("type") in CALL_TYPES:
            if cid in calls:
                repairs.append(f"line {n}: a second call with call_id {cid!r} was dropped")
            else:
                calls[cid] = n
        elif it.get("type") in RESULT_TYPES:
            if cid not in calls and not any(i.get("call_id") == cid and i.get("type") in CALL_TYPES for _, i in items):
                repairs.append(f"line {n}: a {it.get('type')} whose call {cid!r} is nowhere was dropped")
            elif cid in results:
                repairs.append(f"line {n}: a second result for call_id {cid!r} was dropped")
            else:
                results[cid] = it
                result_lines[cid] = n
    # Calls after the last message or result are still pending: they may wait for their result.
    last_settled = max(
        (k for k, (_, it) in enumerate(items) if it.get("type") not in CALL_TYPES and it.get("type") != "reasoning"),
        default=-1,
    )
    out: list[dict[str, Any]] = []
    placed: set[str] = set()
    for k, (n, it) in enumerate(items):
        kind = it.get("type")
        cid = it.get("call_id")
        if kind in RESULT_TYPES:
            continue  # placed after its call
        if kind in CALL_TYPES and isinstance(cid, str):
            if cid in placed or calls.get(cid) != n:
                continue
            placed.add(cid)
            out.append(it)
            result = results.get(cid)
            if result is not None:
                if result_lines[cid] < n:
                    repairs.append(f"line {n}: the result of call {cid!r} was written before the call; moved after it")
                out.append(result)
            elif k < last_settled:
                repairs.append(f"line {n}: call {cid!r} had no result; a synthetic one was added")
                out.append({"type": CALL_TYPES[kind], "call_id": cid, "output": NO_RESULT_TEXT})
            continue
        out.append(it)
    # The provider rejects reasoning without its following item: an interrupted turn's last one.
    while out and out[-1].get("type") == "reasoning":
        repairs.append("a reasoning item with no item after it (an interrupted turn) was dropped")
        out.pop()
    return out


#: Content of the synthetic result given to a call whose result the log never recorded (the same
#: text as :data:`context_compactor.io.NO_RESULT_TEXT`).
NO_RESULT_TEXT = "(no result was recorded)"
