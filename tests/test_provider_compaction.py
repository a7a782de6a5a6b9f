"""Provider compaction output as an earlier summary (DESIGN, Formats, "Provider compaction output";
design note in ``src/formats/anthropic_compaction.rs``): OpenAI ``compaction`` items and Anthropic ``compaction``
blocks are never split, edited or re-summarised; Anthropic's block opens the conversation."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _responses import encrypted
from context_compactor import ContextCompactor, validate_messages

# -- OpenAI compaction items -----------------------------------------------------------------------


def item_run(n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for k in range(n):
        items.append(
            {"type": "function_call", "call_id": f"c{k}", "name": "read", "arguments": f'{{"p": "src/m{k}.py"}}'}
        )
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": f"line {k} of output\n" * 120})
    return items


def test_openai_compaction_item_and_the_user_messages_before_it_are_kept() -> None:
    """`responses.compact` returns the user messages followed by one compaction item."""
    task = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "重构 src/app.py"}]}
    later = {"type": "message", "role": "user", "content": "also update docs/README.md"}
    comp = {"type": "compaction", "id": "cmp_1", "encrypted_content": encrypted("cmp", 3000)}
    items = [task, *item_run(10), later, *item_run(5), comp, *item_run(40)]
    for it in items[-80:]:
        if "call_id" in it:
            it["call_id"] = "late_" + it["call_id"]
    before = copy.deepcopy(items)
    r = ContextCompactor(max_context_tokens=12000).compact(items, force=True)
    assert items == before
    assert validate_messages(r.messages, format="responses") == []
    out_ids = [id(m) for m in r.messages]
    assert id(comp) in out_ids and id(task) in out_ids and id(later) in out_ids
    assert out_ids.index(id(later)) < out_ids.index(id(comp)), "user messages stay before the compaction item"
    gone = [i for i, m in enumerate(items) if id(m) not in out_ids]
    assert gone and set(gone) <= {e.index for e in r.record}


def test_openai_compaction_item_counts_and_validates() -> None:
    items = [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" + "x" * 100},
        {"role": "user", "content": "hi"},
    ]
    assert validate_messages(items) == []
    assert ContextCompactor().check(items).format == "responses"


# -- Anthropic compaction blocks -------------------------------------------------------------------


def block(content: str | None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "compaction"}
    if content is not None:
        b["content"] = content
    return b


def tool_turns(n: int, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(start, start + n):
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "bash", "input": {"cmd": f"cat f{k}.py"}}],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": f"row {k}\n" * 150}],
            }
        )
    return out


def rules(messages: list[Any]) -> list[tuple[int | None, str]]:
    return [(p.index, p.rule) for p in validate_messages(messages)]


def test_anthropic_block_opening_the_conversation_is_valid() -> None:
    msgs = [{"role": "assistant", "content": [block("Summary: the user asked to fix the login bug in src/auth.py.")]}]
    msgs += [{"role": "user", "content": "continue"}, *tool_turns(2)]
    assert rules(msgs) == []


def test_anthropic_misplaced_and_ambiguous_blocks_are_named() -> None:
    task = {"role": "user", "content": "fix the login bug in src/auth.py please"}
    msgs = [task, {"role": "assistant", "content": [block("first summary")]}, {"role": "user", "content": "go on"}]
    assert (1, "compaction_block_misplaced") in rules(msgs)
    two = [
        {"role": "assistant", "content": [block("a")]},
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [block("b")]},
    ]
    got = rules(two)
    assert (2, "compaction_block_ambiguous") in got and (2, "compaction_block_misplaced") in got


def test_anthropic_repair_starts_at_the_latest_block_and_resends_the_task() -> None:
    task = {"role": "user", "content": "fix the login bug in src/auth.py please and add a test"}
    latest = {"role": "assistant", "content": [block("Work so far: tests were read; nothing changed yet.")]}
    msgs = [task, *tool_turns(3), latest, {"role": "user", "content": "keep going"}, *tool_turns(2, 10)]
    before = copy.deepcopy(msgs)
    r = ContextCompactor().compact(msgs, force=False)
    assert msgs == before
    assert validate_messages(r.messages, format="anthropic") == []
    assert r.messages[0] is latest
    assert r.messages[1] is task, "the block does not hold the task: it is re-sent right after"
    dropped = {e.index for e in r.record if e.action == "dropped"}
    assert dropped == set(range(0, 7))


def test_anthropic_block_holding_the_task_needs_no_resend() -> None:
    task = {"role": "user", "content": "fix the login bug in src/auth.py please and add a test"}
    latest = {
        "role": "assistant",
        "content": [block("The user asked: fix the login bug in src/auth.py please and add a test. Done: ...")],
    }
    msgs = [task, *tool_turns(2), latest, {"role": "user", "content": "keep going"}]
    r = ContextCompactor().compact(msgs, force=False)
    assert validate_messages(r.messages, format="anthropic") == []
    assert r.messages[0] is latest and all(m is not task for m in r.messages)


def test_anthropic_compaction_message_is_never_summarised() -> None:
    latest = {"role": "assistant", "content": [block("Earlier: 修复了 src/auth.py 的登录错误。")]}
    msgs = [latest, {"role": "user", "content": "now the tests in tests/test_auth.py"}, *tool_turns(40)]
    r = ContextCompactor(max_context_tokens=8000).compact(msgs, force=True)
    assert validate_messages(r.messages, format="anthropic") == []
    assert r.messages[0] is latest
    assert r.tokens_after < r.tokens_before
