"""context_compactor.io: the Responses and Gemini request shapes, read and written, on the real corpus.

``save`` writes ``{"input", "instructions", "tools"}`` for Responses items and ``{"contents",
"system_instruction", "tools"}`` for Gemini contents; ``load`` reads both back without a format
hint, with the same items, system prompt and tools, CJK text as it is.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from _gemini import to_gemini, tools_of
from _responses import to_responses
from conftest import openai_corpus_files
from context_compactor import ContextCompactor, validate_messages
from context_compactor.io import TranscriptError, load, loads, save

CODEX = "responses/codex-session-viewer_example.jsonl"
CJK = "glaive_toolcall_zh"


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _round_trip(value: Any) -> Any:
    """What a JSON file holds of ``value`` (bytes as the SDK dumps them: URL-safe base64)."""
    import base64

    return json.loads(json.dumps(value, default=lambda b: base64.urlsafe_b64encode(b).decode("ascii")))


def _corpus_ids() -> list[str]:
    return [p.name for p in openai_corpus_files()] or ["(no corpus)"]


# -- Responses ---------------------------------------------------------------------------------------


def test_the_codex_rollout_saves_as_a_responses_request_and_loads_back(corpus_dir: Path, tmp_path: Path) -> None:
    t = load(corpus_dir / CODEX)
    assert t.format == "responses" and t.system
    out = tmp_path / "codex.json"
    save(out, t.messages, system=t.system, tools=t.tools, format="responses")
    data = json.loads(out.read_text("utf-8"))
    assert list(data) == ["input", "instructions"] and data["instructions"] == t.system
    back = load(out)  # no format hint
    assert (back.format, back.source) == ("responses", "responses_json")
    assert back.messages == t.messages and back.system == t.system and back.tools is None
    enc = [i["encrypted_content"] for i in back.messages if i.get("type") == "reasoning"]
    assert enc and enc == [i["encrypted_content"] for i in t.messages if i.get("type") == "reasoning"]
    assert not validate_messages(back.messages, format="responses", system=back.system)


def test_the_codex_rollout_compacts_and_the_result_reads_back_valid(corpus_dir: Path, tmp_path: Path) -> None:
    t = load(corpus_dir / CODEX)
    result = ContextCompactor(max_context_tokens=16_000).compact(t.messages, system=t.system, format=t.format)
    assert result.strategy != "none"
    out = tmp_path / "compacted.json"
    save(out, result.messages, system=result.system)  # detected from the items: Responses
    back = load(out)
    assert back.format == "responses" and back.messages == _round_trip(result.messages)
    assert not validate_messages(back.messages, format="responses", system=back.system)


@pytest.mark.parametrize("name", _corpus_ids())
def test_every_corpus_conversation_round_trips_as_a_responses_request(
    corpus_dir: Path, tmp_path: Path, name: str
) -> None:
    chat = json.loads((corpus_dir / "openai" / name).read_text("utf-8"))
    items = to_responses(chat)
    tools = [{"type": "function", "name": "search", "description": "搜索网页", "parameters": {"type": "object"}}]
    out = tmp_path / "r.json"
    save(out, items, tools=tools, format="responses")
    text = out.read_text("utf-8")
    back = load(out)
    assert back.format == "responses" and back.messages == items and back.tools == tools and back.system is None
    assert "搜索网页" in text and "\\u641c" not in text  # UTF-8 as it is, not \u escapes
    if CJK in name:
        assert _has_cjk(text) and "\\u" not in text
    # And a bare list of items is read as Responses too.
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(items, ensure_ascii=False), "utf-8")
    assert load(bare).format == "responses" and load(bare).messages == items


def test_sdk_responses_items_are_written_through_model_dump(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="the openai SDK is a test dependency")
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    items: list[Any] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "北京明天天气怎么样？"}]},
        ResponseFunctionToolCall(type="function_call", call_id="call_1", name="weather", arguments='{"city": "北京"}'),
        {"type": "function_call_output", "call_id": "call_1", "output": "晴，25°C"},
        ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="明天北京晴天。", annotations=[])],
        ),
    ]
    out = tmp_path / "sdk.json"
    save(out, items, system="用中文回答。")
    back = load(out)
    assert back.format == "responses" and back.system == "用中文回答。"
    assert back.messages[1] == items[1].model_dump(mode="json", exclude_unset=True)
    assert back.messages[3]["content"][0]["text"] == "明天北京晴天。"
    assert "明天北京晴天。" in out.read_text("utf-8")
    assert not validate_messages(back.messages, format="responses", system=back.system)


def test_a_string_input_is_one_user_message() -> None:
    t = loads('{"input": "你好", "instructions": "Be brief.", "model": "gpt-5"}')
    assert t.format == "responses" and t.system == "Be brief."
    assert t.messages == [{"type": "message", "role": "user", "content": "你好"}]


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('{"input": {"type": "message"}}', "input", "list of Responses items"),
        ('{"input": [{"type": "message", "role": "user", "content": "hi"}, 3]}', "input[1]", "not a number"),
        ('{"input": [], "instructions": ["x"]}', "instructions", "string or null"),
        ('{"input": [], "tools": {"name": "f"}}', "tools", "list of tool definitions"),
    ],
)
def test_a_malformed_responses_request_names_the_field(text: str, field: str, words: str) -> None:
    with pytest.raises(TranscriptError, match="Responses request") as e:
        loads(text)
    assert e.value.field == field and words in str(e.value) and field in str(e.value)


# -- Gemini ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _corpus_ids())
def test_every_corpus_conversation_round_trips_as_a_gemini_request(corpus_dir: Path, tmp_path: Path, name: str) -> None:
    chat = json.loads((corpus_dir / "openai" / name).read_text("utf-8"))
    contents, system = to_gemini(chat, "openai")
    instruction = {"parts": [{"text": system or "你是一个助手。"}]}
    tools = tools_of([{"type": "function", "function": {"name": "search", "description": "搜索"}}])
    out = tmp_path / "g.json"
    save(out, contents, system=instruction, tools=tools, format="gemini")
    text = out.read_text("utf-8")
    assert list(json.loads(text)) == ["contents", "system_instruction", "tools"]
    back = load(out)  # no format hint
    assert (back.format, back.source) == ("gemini", "gemini_json")
    assert back.messages == _round_trip(contents) and back.system == instruction and back.tools == tools
    if CJK in name:
        assert _has_cjk(text) and "\\u" not in text
    # The compactor reads what was written as it read the original (the corpus's one invalid
    # conversation stays invalid in the same place), thought signatures kept.
    assert validate_messages(back.messages, format="gemini", system=back.system) == validate_messages(
        contents, format="gemini", system=instruction
    )
    sigs = [p["thought_signature"] for c in back.messages for p in c["parts"] if "thought_signature" in p]
    assert sigs == [
        p["thought_signature"] for c in _round_trip(contents) for p in c["parts"] if "thought_signature" in p
    ]


def test_sdk_gemini_contents_are_written_through_model_dump_and_validate_back(corpus_dir: Path, tmp_path: Path) -> None:
    types = pytest.importorskip("google.genai.types", reason="google-genai is a test dependency (CPython >= 3.11)")
    chat = json.loads(next((corpus_dir / "openai").glob(f"*{CJK}*")).read_text("utf-8"))
    contents, _ = to_gemini(chat, "openai")
    sdk = [types.Content.model_validate(c) for c in contents]
    out = tmp_path / "sdk.json"
    save(out, sdk, system=types.Content(parts=[types.Part(text="用中文回答。")]))
    back = load(out)
    assert back.format == "gemini" and back.system == {"parts": [{"text": "用中文回答。"}]}
    # The SDK reads the file back into the same objects: thought_signature bytes included.
    assert [types.Content.model_validate(c) for c in back.messages] == sdk
    assert _has_cjk(out.read_text("utf-8"))


def test_camel_case_system_instruction_is_read_and_written_back_snake_case(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "contents": [{"role": "user", "parts": [{"text": "总结这份报告"}]}],
            "systemInstruction": {"parts": [{"text": "只用中文。"}]},
            "generationConfig": {"temperature": 0},
        },
        ensure_ascii=False,
    )
    t = loads(text)
    assert t.format == "gemini" and t.system == {"parts": [{"text": "只用中文。"}]}
    out = tmp_path / "g.json"
    save(out, t.messages, system=t.system, format=t.format)
    assert json.loads(out.read_text("utf-8"))["system_instruction"] == t.system
    assert load(out).system == t.system
    assert loads('{"contents": [], "system_instruction": "plain text"}').system == "plain text"


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('{"contents": {"role": "user"}}', "contents", "list of Content objects"),
        ('{"contents": [{"role": "user", "parts": [{"text": "a"}]}, "b"]}', "contents[1]", "not a string"),
        ('{"contents": [{"role": "user"}]}', "contents[0].parts", 'no "parts"'),
        ('{"contents": [{"role": "user", "parts": "hi"}]}', "contents[0].parts", "list of parts"),
        ('{"contents": [{"role": "user", "parts": [null]}]}', "contents[0].parts[0]", "not null"),
        ('{"contents": [{"role": 1, "parts": []}]}', "contents[0].role", "string"),
        ('{"contents": [], "systemInstruction": 3}', "systemInstruction", "Content, a string or a list"),
        ('{"contents": [], "system_instruction": "a", "systemInstruction": "b"}', "systemInstruction", "keep one"),
        ('{"contents": [], "system_instruction": {"parts": 1}}', "system_instruction.parts", "list of parts"),
        ('{"contents": [], "tools": "search"}', "tools", "list of tools"),
    ],
)
def test_a_malformed_gemini_request_names_the_field(text: str, field: str, words: str) -> None:
    with pytest.raises(TranscriptError, match="Gemini request") as e:
        loads(text)
    assert e.value.field == field and words in str(e.value)


def test_a_request_loads_only_as_its_own_format(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="format='gemini'"):
        loads('{"contents": []}', format="openai")
    with pytest.raises(TranscriptError, match="format='responses'"):
        loads('{"input": []}', format="anthropic")
    assert loads('{"contents": []}', format="gemini").messages == []
    with pytest.raises(TranscriptError, match="OpenAI or Anthropic"):
        loads('{"messages": []}', format="gemini")
    with pytest.raises(TranscriptError, match="'input' \\(a Responses request\\)"):
        loads('{"inputs": []}')
    with pytest.raises(ValueError, match="format"):
        save(tmp_path / "x.json", [], format="xml")  # type: ignore[arg-type]


def test_a_bare_list_of_gemini_contents_is_read_as_gemini() -> None:
    t = loads('[{"role": "user", "parts": [{"text": "你好"}]}, {"role": "model", "parts": [{"text": "你好！"}]}]')
    assert t.format == "gemini" and t.source == "gemini_json"


def test_transcript_errors_pickle_with_their_fields() -> None:
    with pytest.raises(TranscriptError) as e:
        loads('{"input": [1]}')
    copy = pickle.loads(pickle.dumps(e.value))
    assert (type(copy), str(copy), copy.field, copy.line) == (TranscriptError, str(e.value), "input[0]", None)


@pytest.mark.parametrize("fmt", ["responses", "gemini"])
def test_the_compact_command_writes_a_request_that_loads_back(corpus_dir: Path, tmp_path: Path, fmt: str) -> None:
    from context_compactor.cli import main

    chat = json.loads(next((corpus_dir / "openai").glob("*astropy*")).read_text("utf-8"))
    src = tmp_path / "in.json"
    if fmt == "responses":
        save(src, to_responses(chat), system="用中文回答。", format="responses")
    else:
        save(src, to_gemini(chat, "openai")[0], system={"parts": [{"text": "用中文回答。"}]}, format="gemini")
    out = tmp_path / "out.json"
    assert main(["compact", str(src), "--max-tokens", "8000", "--format", fmt, "--out", str(out)]) == 0
    back = load(out)
    assert back.format == fmt and len(back.messages) < len(load(src).messages)
    assert "用中文回答。" in out.read_text("utf-8")
    assert not validate_messages(back.messages, format=fmt, system=back.system)
