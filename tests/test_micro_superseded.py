"""Superseded reads and the cache-aware min-gain rule of micro-compaction (issue 17's policy changes)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from context_compactor import CompactionConfig, ConfigError, ContextCompactor, validate_messages


def call(i: int, name: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def result(i: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


def conversation(steps: list[tuple[str, dict[str, Any]]], big: int = 3000) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Fix the bug in src/app.py. Never touch tests/fixtures."},
    ]
    for i, (name, args) in enumerate(steps):
        msgs.append(call(i, name, **args))
        msgs.append(result(i, f"output {i} " + "line of the file\n" * (big // 17)))
    msgs += [{"role": "user", "content": "go on"}, {"role": "assistant", "content": "done"}] * 3
    return msgs


def compactor(**kw: Any) -> ContextCompactor:
    base: dict[str, Any] = {
        "max_context_tokens": 1_000_000,
        "reserve_tokens": 0,
        "clear_at_least_tokens": 0,
        "micro_min_gain_ratio": 0.0,
        "keep_recent_tool_results": 50,
        "supersede_reads": True,
    }
    base.update(kw)
    return ContextCompactor(**base)


def outputs(msgs: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in msgs if m.get("role") == "tool"}


STEPS: list[tuple[str, dict[str, Any]]] = [
    ("Read", {"file_path": "src/app.py"}),  # c0: superseded by the edit c2
    ("Read", {"file_path": "src/util.py"}),  # c1: never read again
    ("Edit", {"file_path": "src/app.py", "old_string": "a", "new_string": "b"}),  # c2
    ("Read", {"file_path": "./src/util.py"}),  # c3: supersedes c1 (the same file)
    ("Read", {"file_path": "src/app.py"}),  # c4: the latest read of app.py
]


def test_a_read_read_again_or_changed_later_becomes_a_placeholder_naming_the_later_message() -> None:
    msgs = conversation(STEPS)
    before = copy.deepcopy(msgs)
    r = compactor().micro_compact(msgs)
    assert msgs == before, "the input is never mutated"
    out = outputs(r.messages)
    # c0 read src/app.py; message 6 (c2's call) changed it.
    assert out["c0"] == "[context-compactor: output of Read superseded: src/app.py was changed in message 6]"
    assert out["c1"] == "[context-compactor: output of Read superseded: src/util.py was read again in message 8]"
    for c in ("c2", "c3", "c4"):
        assert out[c].startswith(f"output {c[1:]}"), "the latest read of each file and other output stay"
    assert {e.action for e in r.record} == {"cleared"}
    assert any("superseded by message 6" in e.detail for e in r.record)
    assert validate_messages(r.messages) == []
    assert not r.must_keep_missing


def test_off_nothing_is_superseded() -> None:
    msgs = conversation(STEPS)
    r = compactor(supersede_reads=False).micro_compact(msgs)
    assert r.strategy == "none"
    assert all(a is b for a, b in zip(r.messages, msgs, strict=True))


def test_a_range_read_is_superseded_by_a_change_not_by_another_range() -> None:
    steps: list[tuple[str, dict[str, Any]]] = [
        ("Read", {"file_path": "big.py", "offset": 1, "limit": 100}),
        ("Read", {"file_path": "big.py", "offset": 100, "limit": 100}),
        ("str_replace_editor", {"command": "view", "path": "other.py", "view_range": [1, 20]}),
        ("str_replace_editor", {"command": "str_replace", "path": "other.py", "old_str": "x", "new_str": "y"}),
    ]
    out = outputs(compactor().micro_compact(conversation(steps)).messages)
    assert out["c0"].startswith("output 0") and out["c1"].startswith("output 1")
    assert "superseded: other.py was changed" in out["c2"]
    assert out["c3"].startswith("output 3")


def test_shell_cat_and_chinese_paths() -> None:
    steps: list[tuple[str, dict[str, Any]]] = [
        ("bash", {"command": "cat 文档/说明.md"}),
        ("bash", {"command": "cat 文档/说明.md | head"}),  # not a plain read: neither superseded nor superseding
        ("Write", {"file_path": "文档/说明.md", "content": "新内容"}),
    ]
    out = outputs(compactor().micro_compact(conversation(steps)).messages)
    assert out["c0"] == "[context-compactor: output of bash superseded: 文档/说明.md was changed in message 6]"
    assert out["c1"].startswith("output 1")


def test_protected_tools_and_the_recent_window_are_never_touched() -> None:
    msgs = conversation(STEPS)
    out = outputs(compactor(protected_tools=["Read"]).micro_compact(msgs).messages)
    assert all(v.startswith("output") for v in out.values())
    # The tail of the last messages (all the tool turns here) stays byte-identical.
    r = compactor(keep_recent_messages=40).micro_compact(msgs)
    assert all(a is b for a, b in zip(r.messages, msgs, strict=True))


def test_the_must_keep_facts_of_the_calls_stay() -> None:
    msgs = conversation(STEPS)
    r = compactor(clear_at_least_tokens=0).micro_compact(msgs)
    text = json.dumps(r.messages, ensure_ascii=False)
    for path in ("src/app.py", "src/util.py", "tests/fixtures"):
        assert path in text
    assert not r.must_keep_missing


def test_min_gain_skips_a_clearing_that_would_not_repay_the_cache_write() -> None:
    # One old result ages out behind four recent ones: clearing it frees ~1/5 of what the
    # provider would have to write again.
    steps: list[tuple[str, dict[str, Any]]] = [("bash", {"command": f"ls dir{i}"}) for i in range(5)]
    msgs = conversation(steps)
    base = {"keep_recent_tool_results": 4, "supersede_reads": False}
    assert compactor(**base).micro_compact(msgs).strategy == "micro"
    r = compactor(**base, micro_min_gain_ratio=0.5).micro_compact(msgs)
    assert r.strategy == "none" and all(a is b for a, b in zip(r.messages, msgs, strict=True))
    # Four old results out of five: the batch repays it.
    r = compactor(**{**base, "keep_recent_tool_results": 1}, micro_min_gain_ratio=0.5).micro_compact(msgs)
    assert r.strategy == "micro" and sum(e.action == "cleared" for e in r.record) == 4


@pytest.mark.parametrize(
    ("field", "value"),
    [("supersede_reads", 1), ("supersede_reads", "yes"), ("micro_min_gain_ratio", -0.1), ("micro_min_gain_ratio", 2)],
)
def test_bad_values_raise_a_config_error_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ConfigError) as e:
        CompactionConfig(**{field: value})
    assert e.value.field == field
