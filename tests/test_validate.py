"""validate_messages: the real corpus, each rule by hand, and the profiles."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from context_compactor import Problem, analyze_conversation, detect_format, validate_messages


def rules(problems: list[Problem]) -> list[tuple[int | None, str]]:
    return [(p.index, p.rule) for p in problems]


def test_openai_corpus_validates_clean_except_the_known_broken_file(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "openai").glob("*.json"))
    assert len(files) >= 20
    for path in files:
        messages = json.loads(path.read_text(encoding="utf-8"))
        before = copy.deepcopy(messages)
        problems = validate_messages(messages)
        assert messages == before, "validation must not mutate its input"
        assert detect_format(messages) == "openai"
        if path.name == "mini-swe-agent__test_github_issue.json":
            assert rules(problems) == [(21, "missing_tool_result")]
            assert "message 20" in problems[0].message
        else:
            assert problems == [], f"{path.name}: {problems}"


def test_corpus_structure_has_legal_cuts_between_blocks(corpus_dir: Path) -> None:
    path = corpus_dir / "openai" / "mini-swe-agent__astropy__astropy-12907.json"
    messages = json.loads(path.read_text(encoding="utf-8"))
    s = analyze_conversation(messages)
    assert s.format == "openai"
    assert len(s.turns) == 1, "one user task followed by a long tool loop"
    assert len(s.tool_blocks) == 64
    assert s.pending_calls == 1, "the final submit call is still waiting"
    # Cuts fall inside the single turn, between blocks, never inside one.
    for start, end in s.tool_blocks:
        assert not any(start < c <= end for c in s.cut_points)
    assert len([c for c in s.cut_points if s.turns[0][0] < c <= s.turns[0][1]]) > 50


def call(*ids: str, text: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}} for i in ids],
    }


def result(i: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": i, "content": "ok"}


U = {"role": "user", "content": "hi"}
A = {"role": "assistant", "content": "hello"}
S = {"role": "system", "content": "be brief"}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([S, U, call("a"), result("a"), A], []),
        ([S, U, call("a", "b"), result("b"), result("a"), A], []),  # parallel results in any order
        ([U, call("a", "b"), result("a")], []),  # a trailing call may still wait
        ([U, call("a"), U], [(2, "missing_tool_result")]),
        ([U, call("a"), result("a"), A, call("b"), A], [(5, "missing_tool_result")]),
        ([U, result("x")], [(1, "orphan_tool_result")]),
        ([U, call("a"), A, result("a")], [(2, "missing_tool_result"), (3, "result_not_adjacent")]),
        ([U, call("a"), result("a"), result("a")], [(3, "duplicate_tool_result")]),
        ([U, call("a"), result("a"), call("a"), result("a")], [(3, "duplicate_tool_call_id")]),
        ([{"role": "robot", "content": "x"}], [(0, "invalid_role")]),
        ([{"role": "user", "content": "x", "tool_calls": call("a")["tool_calls"]}], [(0, "misplaced_tool_call")]),
        # legacy function_call / function pair by position
        (
            [
                U,
                {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "1"},
            ],
            [],
        ),
    ],
)
def test_openai_rules(messages: list[dict[str, Any]], expected: list[tuple[int, str]]) -> None:
    assert rules(validate_messages(messages)) == expected


def tool_use(i: str, *, thinking: bool = False) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": "let me see", "signature": "sig"})
    blocks.append({"type": "tool_use", "id": i, "name": "bash", "input": {"cmd": "ls"}})
    return {"role": "assistant", "content": blocks}


def tool_result(*ids: str, text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
    if text:
        blocks.append({"type": "text", "text": text})
    return {"role": "user", "content": blocks}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([U, tool_use("a"), tool_result("a"), A], []),
        ([U, tool_use("a"), tool_result("a", text="and now this"), A], []),
        ([U, U, A, A], []),  # the API merges consecutive same-role messages
        ([U, tool_use("a", thinking=True), tool_result("a"), tool_use("b")], []),
        ([A, U], [(0, "first_not_user")]),
        ([U, tool_use("a"), U], [(2, "missing_tool_result")]),
        ([U, tool_result("x")], [(1, "orphan_tool_result")]),
        (
            [
                U,
                tool_use("a"),
                {"role": "user", "content": [{"type": "text", "text": "x"}, *tool_result("a")["content"]]},
            ],
            [(2, "tool_result_not_first")],
        ),
        (
            [
                U,
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "x"}, {"type": "thinking", "thinking": "t"}],
                },
            ],
            [(1, "thinking_not_first")],
        ),
        ([U, {"role": "assistant", "content": []}, U], [(1, "empty_content")]),
        ([U, {"role": "user", "content": ""}], [(1, "empty_content")]),
        ([U, {"role": "system", "content": "x"}, tool_use("a")], [(1, "invalid_role")]),
    ],
)
def test_anthropic_rules(messages: list[dict[str, Any]], expected: list[tuple[int, str]]) -> None:
    assert rules(validate_messages(messages, format="anthropic")) == expected


def test_detection() -> None:
    assert detect_format([U, A]) == "openai"
    assert detect_format([U, tool_use("a"), tool_result("a")]) == "anthropic"
    assert detect_format([S, U]) == "openai"
    assert detect_format([U, call("a"), result("a")]) == "openai"


def test_strict_profile() -> None:
    msgs = [S, U, U, call("a"), result("a"), A, S]
    assert rules(validate_messages(msgs)) == []
    assert rules(validate_messages(msgs, profile="strict")) == [(2, "not_alternating"), (6, "system_not_first")]
    assert rules(validate_messages([S, A], profile="strict")) == [(1, "first_not_user")]


def test_problem_is_readable() -> None:
    (p,) = validate_messages([U, result("x")])
    assert p == Problem(1, "orphan_tool_result", p.message)
    assert "x" in p.message
    assert str(p).startswith("message 1:")
    assert "orphan_tool_result" in repr(p)


def test_unknown_profile_and_format_are_config_errors() -> None:
    from context_compactor import ConfigError

    with pytest.raises(ConfigError) as e:
        validate_messages([U], profile="loose")
    assert e.value.field == "profile"
    with pytest.raises(ConfigError) as e:
        validate_messages([U], format="cohere")
    assert e.value.field == "format"


# -- over the window (max_tokens) ------------------------------------------------------------------


@pytest.mark.parametrize("tokenizer", ["approx", "o200k_base", "len4"])
def test_over_window_counts_the_request_as_token_counter_does(corpus_dir: Path, tokenizer: str) -> None:
    from context_compactor import TokenCounter
    from context_compactor.io import load

    kind: Any = (lambda s: len(s) // 4) if tokenizer == "len4" else tokenizer
    t = load(corpus_dir / "claude-code" / "cc_3d_feb22da51f_3.jsonl")
    tools = [{"name": "bash", "description": "Run a shell command.", "input_schema": {"type": "object"}}]
    request = {"format": t.format, "system": t.system, "tools": tools}
    total = TokenCounter(kind).count_messages(t.messages, **request)
    assert total > TokenCounter(kind).count_messages(t.messages, format=t.format)  # system and tools count
    assert validate_messages(t.messages, **request, max_tokens=total, tokenizer=kind) == []
    (p,) = validate_messages(t.messages, **request, max_tokens=total - 1, tokenizer=kind)
    assert (p.index, p.rule) == (None, "over_window")  # the request as a whole, not one message
    assert str(total) in p.message and str(total - 1) in p.message
    assert str(p) == f"{p.message} (over_window)"


def test_over_window_comes_after_the_message_problems_and_needs_max_tokens() -> None:
    msgs = [U, result("x"), {"role": "user", "content": "word " * 1000}]
    assert rules(validate_messages(msgs)) == [(1, "orphan_tool_result")]
    assert rules(validate_messages(msgs, max_tokens=100)) == [(1, "orphan_tool_result"), (None, "over_window")]
    assert rules(validate_messages(msgs, max_tokens=100, tokenizer=lambda s: 0)) == [(1, "orphan_tool_result")]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 10, "tokenizer": "gpt2"}, "tokenizer"),
    ],
)
def test_bad_max_tokens_or_tokenizer_is_a_config_error(kw: dict[str, Any], field: str) -> None:
    from context_compactor import ConfigError

    with pytest.raises(ConfigError) as e:
        validate_messages([U], **kw)
    assert e.value.field == field
