"""Planner behaviours a user sees: micro rules, selective rules, repair, SDK objects, offload, system summary."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from context_compactor import (
    SUMMARY_MARKER,
    ContextCompactor,
    InvalidConversationError,
    SelectiveRule,
    validate_messages,
)


def tool_conversation(n: int = 12, big: int = 3000, args: int = 50) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Investigate /srv/app/main.py"},
    ]
    for i in range(n):
        name = "memory" if i == 2 else "bash"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps({"cmd": "x" * args, "i": i})},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i} " + "y" * big})
    msgs.append({"role": "assistant", "content": "done"})
    return msgs


def micro(**kw: Any) -> ContextCompactor:
    # Every clearing counts here (the cache-aware min-gain rule has its own tests).
    base: dict[str, Any] = {
        "max_context_tokens": 1_000_000,
        "reserve_tokens": 0,
        "clear_at_least_tokens": 0,
        "micro_min_gain_ratio": 0.0,
    }
    base.update(kw)
    return ContextCompactor(**base)


def test_micro_clears_old_results_keeps_recent_and_protected() -> None:
    msgs = tool_conversation()
    before = copy.deepcopy(msgs)
    r = micro(keep_recent_tool_results=3, protected_tools=["memory"], keep_recent_messages=2).micro_compact(msgs)
    assert msgs == before
    assert r.strategy == "micro"
    contents = {m.get("tool_call_id"): m["content"] for m in r.messages if m.get("role") == "tool"}
    assert contents["c2"] == msgs[7]["content"], "protected tool untouched"
    for i in (9, 10, 11):
        assert contents[f"c{i}"].startswith("output"), "the last results stay"
    cleared = contents["c0"]
    assert cleared.startswith("[context-compactor:") and "bash" in cleared and "chars" in cleared
    assert {e.action for e in r.record} == {"cleared"}
    assert r.messages[0] is msgs[0] and r.messages[1] is msgs[1]
    assert validate_messages(r.messages) == []


def test_micro_cuts_old_long_arguments_as_valid_json() -> None:
    msgs = tool_conversation(args=3000, big=10)
    r = micro(keep_recent_tool_results=2, max_tool_arg_chars=200).micro_compact(msgs)
    calls = [m["tool_calls"][0] for m in r.messages if m.get("tool_calls")]
    cut = json.loads(calls[0]["function"]["arguments"])
    assert cut["i"] == 0 and len(cut["cmd"]) < 400
    assert len(calls[-1]["function"]["arguments"]) > 3000, "recent calls keep their arguments"
    assert any(e.action == "args_cut" for e in r.record)


def test_micro_skips_a_clearing_that_frees_too_little() -> None:
    msgs = tool_conversation(n=6, big=100)
    r = micro(keep_recent_tool_results=1, clear_at_least_tokens=100_000).micro_compact(msgs)
    assert r.strategy == "none"
    assert all(a is b for a, b in zip(r.messages, msgs, strict=True))


def test_offload_dir_keeps_full_output(tmp_path: Path) -> None:
    msgs = tool_conversation(n=5)
    r = micro(keep_recent_tool_results=1, offload_dir=str(tmp_path / "off")).micro_compact(msgs)
    cleared = next(m["content"] for m in r.messages if m.get("tool_call_id") == "c0")
    path = cleared.split("saved to ")[1].rstrip("]")
    assert Path(path).parent == tmp_path / "off"
    assert Path(path).read_text(encoding="utf-8") == msgs[3]["content"]
    files = list((tmp_path / "off").iterdir())
    assert all(f.suffix == ".txt" for f in files)


def test_selective_rules_drop_thinking_of_finished_turns_anthropic() -> None:
    long = "I am thinking about this carefully. " * 200
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for i in range(6):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": long, "signature": "sig"},
                    {"type": "text", "text": f"answer {i}"},
                ],
            }
        )
        msgs.append({"role": "user", "content": f"next question {i}"})
    c = ContextCompactor(max_context_tokens=9000, reserve_tokens=0, keep_recent_messages=2, clear_at_least_tokens=0)
    r = c.compact(msgs)
    assert r.strategy == "selective"
    assert any(e.action == "thinking_dropped" for e in r.record)
    assert validate_messages(r.messages, format="anthropic") == []
    assert r.messages[-2] is msgs[-2], "the recent tail keeps its thinking"


def test_custom_selective_rules_never_touch_tool_results() -> None:
    msgs = tool_conversation()
    rules = (SelectiveRule("tool_results", "never", 10), SelectiveRule("assistant_text", "head_tail", 30))
    c = ContextCompactor(
        max_context_tokens=20_000,
        reserve_tokens=0,
        selective_rules=rules,
        micro_trigger_ratio=1.0,
        keep_recent_messages=2,
    )
    r = c.compact(msgs)
    assert not any(e.action == "cleared" for e in r.record)


def test_repair_and_repair_false() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "user", "content": "where is the result?"},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
        {"role": "assistant", "content": "ok"},
    ]
    r = ContextCompactor().compact(msgs)
    assert validate_messages(r.messages) == []
    assert any("synthetic" in x for x in r.repairs) and any("orphan" in x for x in r.repairs)
    assert r.messages[2]["role"] == "tool" and r.messages[2]["tool_call_id"] == "a"
    with pytest.raises(InvalidConversationError) as e:
        ContextCompactor(repair=False).compact(msgs)
    assert [p.rule for p in e.value.problems] == ["missing_tool_result", "orphan_tool_result"]


def test_anthropic_late_result_moved_after_its_call() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                {"type": "tool_use", "id": "b", "name": "f", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "A"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "waiting"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "B"}]},
    ]
    r = ContextCompactor().compact(msgs, format="anthropic")
    assert validate_messages(r.messages, format="anthropic") == []
    ids = [b["tool_use_id"] for b in r.messages[2]["content"]]
    assert ids == ["a", "b"]


def test_sdk_objects_kept_same_and_edited_as_dicts() -> None:
    from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
    from openai.types.chat.chat_completion_message_function_tool_call import Function

    msgs: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(8):
        msgs.append(
            ChatCompletionMessage(
                role="assistant",
                content=None,
                tool_calls=[
                    ChatCompletionMessageFunctionToolCall(
                        id=f"c{i}",
                        type="function",
                        function=Function(name="bash", arguments='{"cmd": "' + "z" * 900 + '"}'),
                    )
                ],
            )
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "out " * 800})
    r = micro(keep_recent_tool_results=2, max_tool_arg_chars=100, keep_recent_messages=2).micro_compact(msgs)
    assert validate_messages(r.messages) == []
    assert r.messages[-2] is msgs[-2], "kept SDK objects come back as the same objects"
    edited = r.messages[1]
    assert isinstance(edited, dict) and edited["role"] == "assistant"
    assert len(edited["tool_calls"][0]["function"]["arguments"]) < 400


def test_summary_in_anthropic_system_prompt() -> None:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "task " * 10}]
    for i in range(30):
        msgs.append({"role": "assistant", "content": f"step {i} " + "words " * 150})
        msgs.append({"role": "user", "content": f"continue {i}"})
    c = ContextCompactor(max_context_tokens=6000, reserve_tokens=0, summary_role="system")
    r = c.compact(msgs, system="You are helpful.", format="anthropic")
    assert r.strategy in ("rule_summary", "truncation")
    assert isinstance(r.system, str) and r.system.startswith("You are helpful.")
    assert SUMMARY_MARKER in r.system
    assert validate_messages(r.messages, format="anthropic") == []
    blocks_system = [{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}]
    r = c.compact(msgs, system=blocks_system, format="anthropic")
    assert r.system[0] is blocks_system[0] and SUMMARY_MARKER in r.system[-1]["text"]


def test_min_savings_refuses_tiny_compactions() -> None:
    msgs = tool_conversation(n=4, big=50)
    c = ContextCompactor(max_context_tokens=1000, reserve_tokens=0, min_savings_ratio=0.99, clear_at_least_tokens=0)
    r = c.compact(msgs, force=True)
    assert r.strategy == "none" and r.reason and "min_savings_ratio" in r.reason
