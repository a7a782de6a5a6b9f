"""Reading OpenAI and Anthropic messages: dicts, SDK objects, parts, and wrong types."""

from __future__ import annotations

import copy
import sys
from collections import UserDict
from typing import Any

import pytest

from context_compactor import (
    CompactorError,
    MessageTypeError,
    analyze_conversation,
    detect_format,
    estimate_tokens,
    validate_messages,
)


def test_openai_sdk_objects_are_read_by_attribute() -> None:
    from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
    from openai.types.chat.chat_completion_message_function_tool_call import Function

    reply = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            ChatCompletionMessageFunctionToolCall(
                id="call_1", type="function", function=Function(name="bash", arguments='{"cmd": "ls"}')
            )
        ],
    )
    messages: list[Any] = [{"role": "user", "content": "list files"}, reply]
    assert validate_messages(messages) == []
    assert analyze_conversation(messages).pending_calls == 1
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "a.py"})
    messages.append({"role": "user", "content": "thanks"})
    assert validate_messages(messages) == []
    assert messages[1] is reply
    messages.append({"role": "tool", "tool_call_id": "call_9", "content": "?"})
    assert [p.rule for p in validate_messages(messages)] == ["orphan_tool_result"]


def test_anthropic_sdk_objects_are_read_by_attribute() -> None:
    from anthropic.types import Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage

    response = Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude",
        content=[
            ThinkingBlock(type="thinking", thinking="which files?", signature="sig"),
            TextBlock(type="text", text="Let me look.", citations=None),
            ToolUseBlock(type="tool_use", id="toolu_1", name="bash", input={"cmd": "ls -la", "n": 1.5}),
        ],
        stop_reason="tool_use",
        stop_sequence=None,
        usage=Usage(input_tokens=10, output_tokens=5),
    )
    # The canonical loop appends {"role": "assistant", "content": response.content}.
    messages: list[Any] = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": response.content},
    ]
    assert detect_format(messages) == "anthropic"
    assert validate_messages(messages) == []
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]})
    assert validate_messages(messages) == []
    s = analyze_conversation(messages)
    assert s.tool_blocks == [(1, 2)]
    assert s.thinking_loops == [(1, 2)]
    # The whole response object works as a message too.
    assert validate_messages([{"role": "user", "content": "hi"}, response]) == []


def test_openai_parts_and_mid_conversation_system() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1"}},
            ],
        },
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't"}]},
        {"role": "developer", "content": "new instructions"},
        {"role": "assistant", "content": "ok", "refusal": None},
    ]
    assert validate_messages(messages) == []
    assert detect_format(messages) == "openai"


def test_unknown_anthropic_blocks_and_cache_control_pass() -> None:
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "search", "cache_control": {"type": "ephemeral"}}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "x"}},
                {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [{"type": "x", "url": "u"}]},
                {"type": "brand_new_block", "payload": {"deep": ["strings", "count"]}},
                {"type": "redacted_thinking", "data": "opaque"},
            ],
        },
    ]
    before = copy.deepcopy(messages)
    problems = validate_messages(messages, format="anthropic")
    assert [p.rule for p in problems] == ["thinking_not_first"]
    assert messages == before


def test_mappings_other_than_dict() -> None:
    messages = [UserDict({"role": "user", "content": "hi"}), UserDict({"role": "assistant", "content": "yo"})]
    assert validate_messages(messages) == []


@pytest.mark.parametrize(
    ("messages", "index", "field"),
    [
        (["hello"], 0, "message"),
        ([{"role": "user", "content": "ok"}, 42], 1, "message"),
        ([{"content": "no role"}], 0, "role"),
        ([{"role": 7, "content": "x"}], 0, "role"),
        ([{"role": "user", "content": 42}], 0, "content"),
        ([{"role": "user", "content": [{"type": "text", "text": b"bytes"}]}], 0, "content[0].text"),
        ([{"role": "user", "content": ["not a part"]}], 0, "content[0]"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}],
                }
            ],
            0,
            "tool_calls[0].function.arguments",
        ),
        ([{"role": "tool", "tool_call_id": 5, "content": "x"}], 0, "tool_call_id"),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {1: "x"}}]}],
            0,
            "content[0].input",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": object()}}],
                }
            ],
            0,
            "content[0].input.a",
        ),
    ],
)
def test_wrong_types_raise_message_type_error(messages: list[Any], index: int, field: str) -> None:
    with pytest.raises(MessageTypeError) as e:
        validate_messages(messages)
    assert e.value.index == index
    assert e.value.field == field
    assert isinstance(e.value, TypeError)
    assert isinstance(e.value, CompactorError)
    assert f"message {index}" in str(e.value)


def test_messages_must_be_a_list() -> None:
    with pytest.raises(MessageTypeError) as e:
        validate_messages("hello")  # type: ignore[arg-type]
    assert e.value.index is None
    assert e.value.field == "messages"


def test_cyclic_and_deep_blocks_raise_typed_errors() -> None:
    cyclic: dict[str, Any] = {"type": "mystery"}
    cyclic["self"] = cyclic
    with pytest.raises(MessageTypeError) as e:
        validate_messages([{"role": "user", "content": [cyclic]}], format="anthropic")
    assert e.value.index == 0
    deep: Any = "leaf"
    for _ in range(200):
        deep = [deep]
    msg = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"x": deep}}]}
    with pytest.raises(MessageTypeError):
        validate_messages([{"role": "user", "content": "go"}, msg])


def test_attribute_errors_from_objects_are_typed() -> None:
    class Exploding:
        @property
        def role(self) -> str:
            raise RuntimeError("boom")

    with pytest.raises(MessageTypeError) as e:
        validate_messages([Exploding()])
    assert e.value.index == 0
    assert e.value.field == "role"
    assert isinstance(e.value.__cause__, RuntimeError)


def test_non_ascii_strings_are_read_in_place() -> None:
    # CPython caches a UTF-8 copy inside a str the first time it is asked for one, and
    # sys.getsizeof counts it: reading must leave every string as it was.
    zh = "上下文压缩：保留重要的内容。" * 50
    emoji = "🙂 ok " * 50
    latin = "café " * 50
    messages = [{"role": "user", "content": zh}, {"role": "assistant", "content": [{"type": "text", "text": emoji}]}]
    sizes = [sys.getsizeof(s) for s in (zh, emoji, latin)]
    validate_messages(messages)
    analyze_conversation(messages)
    estimate_tokens(zh)
    estimate_tokens(latin)
    assert [sys.getsizeof(s) for s in (zh, emoji, latin)] == sizes
