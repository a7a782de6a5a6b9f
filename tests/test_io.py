"""context_compactor.io: real transcripts in, valid requests out."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from context_compactor import CompactorError, detect_format, validate_messages
from context_compactor.io import NO_RESULT_TEXT, Transcript, TranscriptError, load, loads, save


def rules(problems: list[Any]) -> list[tuple[int | None, str]]:
    return [(p.index, p.rule) for p in problems]


def assert_plain_json(value: Any, where: str = "messages") -> None:
    """Only dict/list/str/int/float/bool/None, all the way down (no SDK objects, no tuples)."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str), where
            assert_plain_json(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            assert_plain_json(v, f"{where}[{i}]")
    else:
        assert value is None or isinstance(value, (str, int, float, bool)), f"{where}: {type(value).__name__}"


def tool_uses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        b
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


def openai_calls(messages: list[dict[str, Any]]) -> list[str]:
    return [c["id"] for m in messages for c in m.get("tool_calls") or []]


def jsonl(*records: dict[str, Any]) -> str:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n"


# Small builders for hand-made Claude Code logs.
def user(content: Any, uuid: str, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}, **extra}


def asst(mid: str, block: dict[str, Any], uuid: str, **extra: Any) -> dict[str, Any]:
    message = {"id": mid, "role": "assistant", "model": "claude-x", "content": [block]}
    return {"type": "assistant", "uuid": uuid, "message": message, **extra}


def call(cid: str, name: str = "Bash") -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": {"command": "ls"}}


def result(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


THINK = {"type": "thinking", "thinking": "hmm", "signature": "sig-abc"}
PROGRESS = {"type": "progress", "data": {"type": "bash_progress"}, "uuid": "p"}
SNAPSHOT = {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}}


# --------------------------------------------------------------------------------------------
# The real corpus
# --------------------------------------------------------------------------------------------


def test_every_claude_code_session_loads_as_a_valid_anthropic_request(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "claude-code").glob("*.jsonl"))
    assert len(files) >= 6
    for path in files:
        t = load(path)
        assert isinstance(t, Transcript)
        assert (t.format, t.source, t.path, t.system, t.tools) == (
            "anthropic",
            "claude_code_jsonl",
            str(path),
            None,
            None,
        )
        assert t.messages and t.messages[0]["role"] == "user"
        assert validate_messages(t.messages, format="anthropic") == [], path.name
        assert validate_messages(t.messages) == [], f"{path.name}: detected as {detect_format(t.messages)}"
        assert t.repairs == [], f"{path.name}: the corpus logs are complete; nothing should need repair"
        assert_plain_json(t.messages)
        assert json.loads(json.dumps(t.messages)) == t.messages
        for m in t.messages:
            assert set(m) == {"role", "content"}, "only what the API takes"
            assert m["content"], "no empty content"
            if m["role"] == "assistant":
                kinds = [b["type"] for b in m["content"]]
                thinking = [k == "thinking" for k in kinds]
                assert thinking == sorted(thinking, reverse=True), "thinking blocks open their message"
                assert all(b["signature"] for b in m["content"] if b["type"] == "thinking")

        # Everything that is not a user/assistant record is accounted for as skipped
        # (progress, snapshots, system records, queue operations, PR links).
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        kept = sum(r["type"] in ("user", "assistant") for r in records)
        assert t.skipped == len(records) - kept, path.name
        # Every call the log made is in the request, once.
        logged_calls = {
            b["id"]
            for r in records
            if r["type"] == "assistant"
            for b in r["message"]["content"]
            if b["type"] == "tool_use"
        }
        ids = [b["id"] for b in tool_uses(t.messages)]
        assert len(ids) == len(set(ids)) == len(logged_calls)


def test_claude_code_sessions_match_their_converted_openai_counterparts(corpus_dir: Path) -> None:
    for path in sorted((corpus_dir / "claude-code").glob("*.jsonl")):
        counterpart = corpus_dir / "openai" / f"kimi-cli-claude-code__{path.stem}.json"
        converted = json.loads(counterpart.read_text(encoding="utf-8"))

        t = load(path)
        assert len(tool_uses(t.messages)) == len(openai_calls(converted)), path.name
        assert {b["id"] for b in tool_uses(t.messages)} == set(openai_calls(converted))

        # Asking for OpenAI converts the rebuilt request: the same messages as the corpus's own
        # conversion. (Parallel results come in call order here and in log order there, so
        # compare the multiset of tool-call ids, not their order.)
        o = load(path, format="openai")
        assert (o.format, o.source, o.skipped) == ("openai", "claude_code_jsonl", t.skipped)
        assert len(o.messages) == len(converted), path.name
        assert [m["role"] for m in o.messages] == [m["role"] for m in converted]
        assert openai_calls(o.messages) == openai_calls(converted)
        assert sorted(m["tool_call_id"] for m in o.messages if m["role"] == "tool") == sorted(
            m["tool_call_id"] for m in converted if m["role"] == "tool"
        )
        assert validate_messages(o.messages, format="openai") == [], path.name


def test_parallel_results_written_after_a_later_call_are_put_back(corpus_dir: Path) -> None:
    # cc_3d: one API message made four calls (WebFetch + three Reads) written on separate lines;
    # the results came back in completion order, the WebFetch's last, after the other calls.
    t = load(corpus_dir / "claude-code" / "cc_3d_feb22da51f_3.jsonl")
    i = next(
        i
        for i, m in enumerate(t.messages)
        if m["role"] == "assistant" and any(b.get("name") == "WebFetch" for b in m["content"])
    )
    calls = [b["id"] for b in t.messages[i]["content"] if b["type"] == "tool_use"]
    assert len(calls) == 4
    assert t.messages[i]["content"][0]["type"] == "thinking"
    results = t.messages[i + 1]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == calls


def test_meta_command_and_image_records_are_kept(corpus_dir: Path) -> None:
    t = load(corpus_dir / "claude-code" / "cc_29_77bc73228c_1.jsonl")
    # The isMeta caveat and the /clear command record are what Claude Code sent the model.
    assert t.messages[0]["content"].startswith("<local-command-caveat>")
    assert t.messages[1]["content"].startswith("<command-name>/clear</command-name>")
    images = [b for m in t.messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "image"]
    assert len(images) == 3
    assert all(b["source"]["type"] == "base64" and b["source"]["data"] for b in images)


def test_every_openai_corpus_file_loads_unchanged(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "openai").glob("*.json"))
    assert len(files) >= 20
    for path in files:
        raw = json.loads(path.read_text(encoding="utf-8"))
        t = load(path)
        assert (t.format, t.source, t.system, t.skipped, t.repairs) == ("openai", "openai_json", None, 0, [])
        assert len(t.messages) == len(raw), path.name
        assert t.messages == raw, "JSON files are taken as they are, never repaired"
        assert_plain_json(t.messages)
    # The known-broken file stays broken: loading reports nothing away, validation finds it.
    t = load(corpus_dir / "openai" / "mini-swe-agent__test_github_issue.json")
    assert rules(validate_messages(t.messages)) == [(21, "missing_tool_result")]


# --------------------------------------------------------------------------------------------
# Hand-made Claude Code logs: each repair and each record kind
# --------------------------------------------------------------------------------------------


def test_blocks_of_one_message_are_merged_in_order_without_duplicates() -> None:
    log = jsonl(
        user("do it", "u1"),
        asst("m1", text("first"), "a1"),
        asst("m1", THINK, "a2"),  # thinking logged after the text: moved to the front
        asst("m1", call("c1"), "a3"),
        user([result("c1")], "u2"),
        asst("m1", call("c2"), "a4"),  # the same API message goes on after c1's result
        asst("m1", call("c2"), "a4b"),  # an exact duplicate block
        PROGRESS,
        user([result("c2")], "u3"),
        asst("m2", text("done"), "a5"),
    )
    t = loads(log)
    assert [m["role"] for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in t.messages[1]["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert t.messages[1]["content"][0]["signature"] == "sig-abc"
    assert [b["tool_use_id"] for b in t.messages[2]["content"]] == ["c1", "c2"]
    assert t.skipped == 1
    assert t.repairs == ["line 2: moved the thinking blocks to the front of their message"]
    assert validate_messages(t.messages, format="anthropic") == []
    assert repr(t) == (
        "Transcript(format='anthropic', source='claude_code_jsonl', messages=4, tools=None, path=None, "
        "skipped=1, repairs=1)"
    )


def test_missing_results_get_a_synthetic_error_except_a_trailing_pending_call() -> None:
    log = jsonl(
        user("go", "u1"),
        asst("m1", call("c1"), "a1"),
        asst("m1", call("c2"), "a2"),
        user([result("c2")], "u2"),  # c1 never answered
        user("next", "u3"),
        asst("m2", call("c3"), "a3"),  # never answered, but the conversation goes on
        user("[Request interrupted by user]", "u4"),
        asst("m3", THINK, "a4"),
        asst("m3", call("c4"), "a5"),  # the very last message: a pending call
    )
    t = loads(log)
    assert validate_messages(t.messages, format="anthropic") == []
    first = t.messages[2]["content"]
    assert [b["tool_use_id"] for b in first] == ["c1", "c2"]
    assert first[0] == {"type": "tool_result", "tool_use_id": "c1", "content": NO_RESULT_TEXT, "is_error": True}
    assert t.messages[5]["content"][0]["tool_use_id"] == "c3"
    assert t.messages[5]["content"][0]["is_error"] is True
    assert t.messages[-1]["role"] == "assistant"
    assert t.messages[-1]["content"][-1]["id"] == "c4"
    assert t.repairs == [
        "line 2: tool call 'c1' has no result in the log; added an error result",
        "line 6: tool call 'c3' has no result in the log; added an error result",
    ]


def test_orphan_and_duplicate_results_are_dropped() -> None:
    log = jsonl(
        user("go", "u1"),
        asst("m1", call("c1"), "a1"),
        user([result("c1", "first")], "u2"),
        user([result("c1", "again")], "u3"),
        user([result("ghost")], "u4"),
        asst("m2", text("done"), "a2"),
    )
    t = loads(log)
    assert validate_messages(t.messages, format="anthropic") == []
    assert t.messages[2] == {"role": "user", "content": [result("c1", "first")]}
    assert len(t.messages) == 4
    assert any("second result" in r for r in t.repairs)
    assert any("'ghost'" in r and "not in the log" in r for r in t.repairs)


def test_non_message_records_sidechains_and_duplicates_are_skipped() -> None:
    log = jsonl(
        SNAPSHOT,
        {"type": "summary", "summary": "Session title", "leafUuid": "x"},
        user("hello", "u1"),
        user("hello", "u1"),  # the same record written twice (resume)
        {"type": "system", "subtype": "stop_hook_summary", "uuid": "s1"},
        {"type": "system", "subtype": "local_command", "content": "<local-command-stdout></local-command-stdout>"},
        {"type": "queue-operation", "operation": "enqueue"},
        asst("side", text("sub-agent"), "x1", isSidechain=True),
        user("sub-agent prompt", "x2", isSidechain=True),
        asst("err", text("API Error: 529"), "e1", isApiErrorMessage=True),
        asst("m1", text("hi"), "a1"),
        user("   ", "u2"),  # blank
        user("<local-command-caveat>Caveat</local-command-caveat>", "u3", isMeta=True),
    )
    t = loads(log)
    assert t.messages == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": [text("hi")]},
        {"role": "user", "content": "<local-command-caveat>Caveat</local-command-caveat>"},
    ]
    assert t.skipped == 10
    assert validate_messages(t.messages, format="anthropic") == []


def test_a_compaction_boundary_starts_the_context_with_its_summary() -> None:
    log = jsonl(
        user("old question", "u1"),
        asst("m1", text("old answer"), "a1"),
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "b1"},
        user("This session is being continued... Summary: ...", "u2", isCompactSummary=True),
        user("new question", "u3"),
        asst("m2", text("new answer"), "a2"),
    )
    t = loads(log)
    assert [m["content"] for m in t.messages[:2]] == [
        "This session is being continued... Summary: ...",
        "new question",
    ]
    assert t.skipped == 3
    assert validate_messages(t.messages, format="anthropic") == []


def test_a_log_that_starts_with_the_assistant_gets_a_user_message_in_front() -> None:
    t = loads(jsonl(asst("m1", text("resumed"), "a1"), user("ok", "u1")))
    assert t.messages[0]["role"] == "user"
    assert rules(validate_messages(t.messages, format="anthropic")) == []
    assert t.repairs == ["the log starts with the assistant; added a user message in front"]


def test_blocks_are_kept_as_they_are() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
    cached = {"type": "text", "text": "big", "cache_control": {"type": "ephemeral"}}
    server = {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "q"}}
    unknown = {"type": "brand_new_block", "payload": [1, 2]}
    log = jsonl(
        user([cached], "u1"),
        asst("m1", server, "a1"),
        asst("m1", unknown, "a2"),
        asst("m1", {**call("c1", "Screenshot"), "caller": {"type": "direct"}}, "a3"),
        user([result("c1", [text("shot"), image])], "u2"),
        asst("m2", text(""), "a4"),  # blank text: the API rejects it
        asst("m2", text("done"), "a5"),
    )
    t = loads(log)
    assert t.messages[0]["content"] == [cached]
    assert t.messages[1]["content"] == [server, unknown, {**call("c1", "Screenshot"), "caller": {"type": "direct"}}]
    assert t.messages[2]["content"] == [result("c1", [text("shot"), image])]
    assert t.messages[3]["content"] == [text("done")]
    assert validate_messages(t.messages, format="anthropic") == []


def test_tool_results_come_first_when_a_record_also_has_text() -> None:
    log = jsonl(
        user("go", "u1"),
        asst("m1", call("c1"), "a1"),
        user([text("[Request interrupted by user for tool use]"), result("c1", "rejected")], "u2"),
    )
    t = loads(log)
    assert t.messages[2]["content"] == [result("c1", "rejected")]
    assert t.messages[3]["content"] == [text("[Request interrupted by user for tool use]")]
    assert validate_messages(t.messages, format="anthropic") == []


def test_a_single_record_and_crlf_line_ends() -> None:
    one = json.dumps(user("only", "u1"))
    assert loads(one).messages == [{"role": "user", "content": "only"}]
    two = jsonl(user("a\u2028b", "u1"), asst("m1", text("c"), "a1")).replace("\n", "\r\n")
    t = loads(two)
    assert t.messages[0]["content"] == "a\u2028b"
    assert len(t.messages) == 2


# --------------------------------------------------------------------------------------------
# JSON forms, detection and save
# --------------------------------------------------------------------------------------------


ANTHROPIC_REQUEST: dict[str, Any] = {
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "列出文件"},
        {"role": "assistant", "content": [THINK, call("c1")]},
        {"role": "user", "content": [result("c1", "a.py\nb.py")]},
        {"role": "assistant", "content": "a.py, b.py"},
    ],
    "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object", "properties": {}}}],
}


def test_anthropic_dict_round_trips_through_save_and_load(tmp_path: Path) -> None:
    t = loads(json.dumps(ANTHROPIC_REQUEST))
    assert (t.format, t.source) == ("anthropic", "anthropic_json")
    assert (t.system, t.tools, t.messages) == (
        ANTHROPIC_REQUEST["system"],
        ANTHROPIC_REQUEST["tools"],
        ANTHROPIC_REQUEST["messages"],
    )

    out = tmp_path / "request.json"
    save(out, t.messages, system=t.system, tools=t.tools)
    back = load(out)
    assert (back.format, back.system, back.tools, back.messages) == ("anthropic", t.system, t.tools, t.messages)
    assert back.path == str(out)
    assert "列出文件" in out.read_text(encoding="utf-8"), "written as UTF-8, not \\u escapes"

    # Without a system prompt, the file still reads back as Anthropic.
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    save(out, plain, format="anthropic")
    again = load(out)
    assert (again.format, again.system, again.tools, again.messages) == ("anthropic", None, None, plain)
    assert [p.name for p in tmp_path.iterdir()] == ["request.json"], "no temporary file left behind"


def test_openai_save_and_load(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "r"},
    ]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    out = tmp_path / "chat.json"
    save(out, messages)
    assert json.loads(out.read_text(encoding="utf-8")) == messages, "a bare list"
    save(out, messages, tools=tools)
    assert json.loads(out.read_text(encoding="utf-8")) == {"messages": messages, "tools": tools}
    t = load(out)
    assert (t.format, t.source, t.system, t.tools, t.messages) == ("openai", "openai_json", None, tools, messages)
    os.chmod(out, 0o640)
    save(out, messages[1:2])
    assert (out.stat().st_mode & 0o777) == 0o640, "replacing a file keeps its permissions"


def test_save_writes_sdk_objects_as_plain_json(tmp_path: Path) -> None:
    types = pytest.importorskip("anthropic.types")
    block = types.TextBlock(type="text", text="hello")
    out = tmp_path / "sdk.json"
    save(out, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [block]}], format="anthropic")
    assert load(out).messages[1] == {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}


def test_bare_list_detection_and_forcing() -> None:
    anthropic_list = ANTHROPIC_REQUEST["messages"]
    t = loads(json.dumps(anthropic_list))
    assert (t.format, t.source, t.system) == ("anthropic", "anthropic_json", None)
    plain = [{"role": "user", "content": "hi"}]
    assert loads(json.dumps(plain)).format == "openai"
    forced = loads(json.dumps(plain), format="anthropic")
    assert (forced.format, forced.messages) == ("anthropic", plain)
    # OpenAI-shaped dict with Anthropic tool definitions is Anthropic.
    t = loads(json.dumps({"messages": plain, "tools": ANTHROPIC_REQUEST["tools"]}))
    assert t.format == "anthropic"
    # A JSONL file of plain messages.
    t = loads(jsonl(*plain, {"role": "assistant", "content": "yo"}))
    assert (t.format, t.source, len(t.messages)) == ("openai", "openai_jsonl", 2)


def test_anthropic_request_can_be_converted_to_openai() -> None:
    t = loads(json.dumps(ANTHROPIC_REQUEST), format="openai")
    assert (t.format, t.source, t.system) == ("openai", "anthropic_json", None)
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.messages[0]["content"] == "You are terse."
    assert t.messages[2]["tool_calls"][0]["function"] == {"name": "Bash", "arguments": '{"command": "ls"}'}
    assert t.messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"}
    assert validate_messages(t.messages, format="openai") == []


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_malformed_jsonl_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(jsonl(user("a", "u1"), asst("m1", text("b"), "a1")) + '{"type": "user", "message": \n', "utf-8")
    with pytest.raises(TranscriptError) as info:
        load(path)
    e = info.value
    assert (e.line, e.path) == (3, str(path))
    assert "line 3" in str(e)
    assert isinstance(e, ValueError) and isinstance(e, CompactorError)


def test_malformed_json_names_its_line() -> None:
    with pytest.raises(TranscriptError, match="line 3") as info:
        loads('[\n  {"role": "user", "content": "hi"},\n  {"role": "assistant" "content": "x"}\n]')
    assert info.value.line == 3


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   \n",
        '{"foo": 1}',
        '"just a string"',
        '[{"role": "user", "content": "hi"}, 3]',
        '{"messages": {"role": "user"}}',
        '{"system": 5, "messages": []}',
        '{"type": "response_item"}\n{"type": "response_item"}',
    ],
)
def test_what_is_not_a_transcript_is_a_transcript_error(bad: str) -> None:
    with pytest.raises(TranscriptError):
        loads(bad)


def test_missing_file_and_bad_format(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.json")
    with pytest.raises(ValueError, match="format"):
        loads("[]", format="yaml")  # type: ignore[arg-type]
