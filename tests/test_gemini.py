"""Gemini ``contents`` (``format="gemini"``): reading dicts and ``google.genai.types`` objects,
detection, Gemini's validity rules and repairs, thought signatures, and the output in the input's
own types."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from context_compactor import (
    ContextCompactor,
    MessageTypeError,
    TokenCounter,
    detect_format,
    validate_messages,
)

genai = pytest.importorskip("google.genai", reason="google-genai is not installed (the [gemini] extra)")
from google.genai import types  # noqa: E402

from context_compactor.integrations.gemini import (  # noqa: E402
    GeminiChat,
    check_contents,
    compact_contents,
    request_extras,
)

SIG = b"\x00\xffopaque-signature\x10" * 8


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def model_call(name: str, args: dict[str, Any], *, cid: str | None = None, sig: bytes | None = SIG) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name, "args": args}
    if cid:
        fc["id"] = cid
    part: dict[str, Any] = {"function_call": fc}
    if sig is not None:
        part["thought_signature"] = sig
    return {"role": "model", "parts": [{"text": "let me look", "thought": True}, part]}


def response(name: str, output: str, *, cid: str | None = None) -> dict[str, Any]:
    fr: dict[str, Any] = {"name": name, "response": {"output": output}}
    if cid:
        fr["id"] = cid
    return {"role": "user", "parts": [{"function_response": fr}]}


def agent_run(steps: int = 14, *, ids: bool = False) -> list[dict[str, Any]]:
    contents = [user("修复 src/billing/tax.py 里失败的测试，然后运行 tests/test_tax.py")]
    for i in range(steps):
        cid = f"c{i}" if ids else None
        contents.append(model_call("bash", {"cmd": f"cat src/mod_{i}.py"}, cid=cid, sig=SIG + bytes([i])))
        contents.append(response("bash", f"内容 {i}: " + "def f(x): return x * 1.07  # 税 " * 60, cid=cid))
    contents.append({"role": "model", "parts": [{"text": "The tax rounding is fixed in src/billing/tax.py."}]})
    contents.append(user("谢谢，再检查一下 README.md"))
    return contents


def as_types(contents: list[dict[str, Any]]) -> list[types.Content]:
    return [types.Content.model_validate(c) for c in contents]


# -- reading and detection -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dicts", "types"])
def test_detected_and_valid(kind: str) -> None:
    contents = agent_run()
    msgs = contents if kind == "dicts" else as_types(contents)
    assert detect_format(msgs) == "gemini"
    assert validate_messages(msgs) == []
    counted = TokenCounter().count_messages(msgs)
    assert counted == TokenCounter().count_messages(msgs, format="gemini") > 1000


def test_existing_formats_are_detected_as_before() -> None:
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"
    assert detect_format([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]) == "anthropic"
    # A user-only Gemini list is Gemini too: no other format has `parts` messages.
    assert detect_format([user("hi")]) == "gemini"


def test_camel_case_rest_json_reads_like_the_sdk_dicts() -> None:
    rest = [
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "ls", "args": {"d": "/tmp"}}, "thoughtSignature": "c2ln"}],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a.txt"}}}]},
    ]
    snake = [
        rest[0],
        {
            "role": "model",
            "parts": [{"function_call": {"name": "ls", "args": {"d": "/tmp"}}, "thought_signature": "c2ln"}],
        },
        {"role": "user", "parts": [{"function_response": {"name": "ls", "response": {"output": "a.txt"}}}]},
    ]
    assert validate_messages(rest) == []
    assert TokenCounter().count_messages(rest) == TokenCounter().count_messages(snake)


def test_media_parts_are_counted_as_images() -> None:
    png = types.Part.from_bytes(data=b"\x89PNG\r\n" + b"\0" * 64, mime_type="image/png")
    uri = types.Part.from_uri(file_uri="gs://bucket/report.pdf", mime_type="application/pdf")
    text = types.Content(role="user", parts=[types.Part.from_text(text="look")])
    with_media = types.Content(role="user", parts=[types.Part.from_text(text="look"), png, uri])
    counter = TokenCounter()
    assert counter.count_messages([with_media]) - counter.count_messages([text]) >= 2 * 1000


def test_code_execution_parts_pass_through_and_count() -> None:
    code = {"executable_code": {"code": "print(sum(range(10)))" * 20, "language": "PYTHON"}}
    result = {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "45\n" * 50}}
    contents = [user("compute"), {"role": "model", "parts": [code, result, {"text": "45"}]}]
    assert validate_messages(contents) == []
    assert TokenCounter().count_messages(contents) > TokenCounter().count_messages([user("compute")]) + 100
    typed = as_types(contents)
    assert TokenCounter().count_messages(typed) == TokenCounter().count_messages(contents)


def test_system_instruction_and_tools_are_counted() -> None:
    config = types.GenerateContentConfig(
        system_instruction="You are a coding agent. " * 20,
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="bash", description="Run " * 50)])],
    )
    system, tools = request_extras(config)
    counter = TokenCounter()
    bare = counter.count_messages([user("hi")])
    assert counter.count_messages([user("hi")], system=system, tools=tools) > bare + 100
    as_content = types.Content(parts=[types.Part.from_text(text="You are a coding agent. " * 20)])
    assert counter.count_messages([user("hi")], system=as_content) == counter.count_messages(
        [user("hi")], system=system
    )
    check = check_contents(ContextCompactor(max_context_tokens=200), [user("hi")], config=config)
    assert check.format == "gemini" and check.current_tokens > bare


def test_wrong_types_name_the_index_field_and_format() -> None:
    bad = [user("hi"), {"role": "model", "parts": [{"text": 42}]}]
    with pytest.raises(MessageTypeError) as e:
        validate_messages(bad)
    assert e.value.index == 1 and e.value.field == "parts[0].text"
    assert "Gemini" in str(e.value)
    with pytest.raises(MessageTypeError) as e:
        validate_messages([user("hi"), {"role": "model", "parts": "text"}])
    assert e.value.field == "parts"


# -- validity ----------------------------------------------------------------------------------------


def rules(contents: list[Any]) -> list[tuple[int | None, str]]:
    return [(p.index, p.rule) for p in validate_messages(contents, format="gemini")]


def test_gemini_rules_name_the_index() -> None:
    call = model_call("bash", {"cmd": "ls"})
    ok = response("bash", "a.txt")
    assert rules([user("go"), call, ok]) == []
    assert rules([user("go"), call]) == []  # a trailing call may still wait
    assert rules([user("go"), ok]) == [(1, "orphan_tool_result")]
    assert (2, "missing_tool_result") in rules([user("go"), call, user("what?")])
    assert rules([user("go"), {"role": "assistant", "parts": [{"text": "x"}]}]) == [(1, "invalid_role")]
    assert rules([model_call("bash", {}), ok]) == [(0, "first_not_user")]
    assert rules([user("go"), {"role": "model", "parts": []}, user("x")]) == [(1, "empty_content")]
    text = {"role": "model", "parts": [{"text": "I will run it"}]}
    assert rules([user("go"), text, call, ok]) == [(2, "function_call_not_after_user")]
    signed_user = {"role": "user", "parts": [{"text": "x", "thought_signature": SIG}]}
    assert rules([signed_user]) == [(0, "thought_signature_separated")]
    parallel = {
        "role": "model",
        "parts": [
            {"function_call": {"name": "a", "args": {}}},
            {"function_call": {"name": "b", "args": {}}, "thought_signature": SIG},
        ],
    }
    answers = {"role": "user", "parts": [response("a", "1")["parts"][0], response("b", "2")["parts"][0]]}
    assert rules([user("go"), parallel, answers]) == [(1, "thought_signature_separated")]


def test_responses_pair_by_id_else_by_order_and_name() -> None:
    calls = {
        "role": "model",
        "parts": [
            {"function_call": {"name": "read", "args": {"p": "a"}}, "thought_signature": SIG},
            {"function_call": {"name": "read", "args": {"p": "b"}}},
            {"function_call": {"name": "ls", "args": {}}},
        ],
    }
    answers = {
        "role": "user",
        "parts": [response(n, "x")["parts"][0] for n in ("ls", "read", "read")],
    }
    assert rules([user("go"), calls, answers]) == []
    too_many = copy.deepcopy(answers)
    too_many["parts"].append(response("read", "x")["parts"][0])
    assert rules([user("go"), calls, too_many]) == [(2, "orphan_tool_result")]
    by_id = [user("go"), model_call("read", {}, cid="x1"), response("read", "ok", cid="x2")]
    assert {r for _, r in rules(by_id)} == {"orphan_tool_result"}


def test_responses_split_over_two_contents_are_reported_and_repaired() -> None:
    calls = {
        "role": "model",
        "parts": [
            {"function_call": {"id": "1", "name": "a", "args": {}}, "thought_signature": SIG},
            {"function_call": {"id": "2", "name": "b", "args": {}}},
        ],
    }
    first = response("a", "one", cid="1")
    second = response("b", "two", cid="2")
    contents = [user("go"), calls, first, second, {"role": "model", "parts": [{"text": "done"}]}]
    assert rules(contents) == [(3, "function_response_not_next")]
    result = ContextCompactor(max_context_tokens=100_000).compact(contents)
    assert validate_messages(result.messages) == []
    assert {(e.index, e.action) for e in result.record} >= {(2, "repaired"), (3, "repaired")}
    merged = result.messages[2]
    assert [p["function_response"]["id"] for p in merged["parts"]] == ["1", "2"]
    assert result.messages[1] is calls


def test_repairs_keep_the_input_types() -> None:
    contents = as_types([user("go"), response("bash", "orphan output"), model_call("bash", {"cmd": "ls"}), user("ok")])
    before = [c.model_dump() for c in contents]
    result = ContextCompactor(max_context_tokens=100_000).compact(contents)
    assert [c.model_dump() for c in contents] == before
    assert all(isinstance(m, types.Content) for m in result.messages)
    assert validate_messages(result.messages) == []
    synthetic = [p for m in result.messages for p in m.parts if p.function_response]
    assert synthetic and synthetic[0].function_response.id is None  # never a made-up id on the wire
    assert synthetic[0].function_response.name == "bash"


# -- compaction ----------------------------------------------------------------------------------------


def summarizer(request: Any) -> str:
    return "<summary>The agent read src/mod_*.py while fixing src/billing/tax.py.</summary>"


@pytest.mark.parametrize("kind", ["dicts", "types"])
@pytest.mark.parametrize("ids", [True, False])
def test_compaction_returns_the_input_types_and_keeps_signed_parts(kind: str, ids: bool) -> None:
    contents = agent_run(ids=ids)
    msgs: list[Any] = contents if kind == "dicts" else as_types(contents)
    snapshot = copy.deepcopy(msgs)
    compactor = ContextCompactor(max_context_tokens=3000, keep_recent_messages=4, summarizer=summarizer)
    result = compact_contents(compactor, msgs)
    assert msgs == snapshot  # the input is never modified
    assert result.strategy == "summary" and not result.over_budget
    out = result.messages
    assert validate_messages(out) == []
    expected = dict if kind == "dicts" else types.Content
    assert all(isinstance(m, expected) for m in out)
    # Round trip through the SDK's own type.
    for m in out:
        types.Content.model_validate(m if isinstance(m, dict) else m.model_dump())
    # The task is first and the same object; the summary is a user content with one text part.
    assert out[0] is msgs[0]
    summary = out[1]
    role = summary["role"] if isinstance(summary, dict) else summary.role
    parts = summary["parts"] if isinstance(summary, dict) else summary.parts
    assert role == "user" and len(parts) == 1
    # Every signed part in the output is an input part unchanged (kept contents are the same objects).
    originals = {id(p) for m in msgs for p in (m["parts"] if isinstance(m, dict) else m.parts)}
    for m in out:
        for p in m["parts"] if isinstance(m, dict) else m.parts:
            sig = p.get("thought_signature") if isinstance(p, dict) else p.thought_signature
            if sig is not None:
                assert id(p) in originals


def test_long_signed_arguments_are_never_cut() -> None:
    contents = [user("go")]
    for i in range(10):
        contents.append(model_call("write", {"path": f"f{i}.py", "text": "x = 1\n" * 400}, sig=SIG + bytes([i])))
        contents.append(response("write", "ok"))
        contents.append(
            {"role": "model", "parts": [{"function_call": {"name": "write", "args": {"text": "y = 2\n" * 400}}}]}
        )
        contents.append(response("write", "ok"))
        contents[-2]["parts"].insert(0, {"text": "next"})
        contents.insert(len(contents) - 2, user("continue"))
    compactor = ContextCompactor(max_context_tokens=200_000, max_tool_arg_chars=200)
    result = compactor.micro_compact(contents)
    assert validate_messages(result.messages) == []
    cut = [r for r in result.record if r.action == "args_cut"]
    assert cut, "the unsigned calls' arguments are cut"
    for m in result.messages:
        for p in m["parts"]:
            if "thought_signature" in p:
                assert p["function_call"]["args"]["text"] == "x = 1\n" * 400


def test_chat_keeps_sdk_objects_and_compacts(monkeypatch: pytest.MonkeyPatch) -> None:
    class Models:
        def __init__(self) -> None:
            self.n = 0

        def generate_content(self, *, model: str, contents: list[Any], config: Any) -> types.GenerateContentResponse:
            assert validate_messages(contents) == []
            self.n += 1
            part = types.Part(
                function_call=types.FunctionCall(name="bash", args={"cmd": f"cat f{self.n}.py"}),
                thought_signature=SIG,
            )
            return types.GenerateContentResponse(
                candidates=[types.Candidate(content=types.Content(role="model", parts=[part]))],
                usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=500 + 40 * self.n),
            )

    class Client:
        models = Models()

    chat = GeminiChat(ContextCompactor(max_context_tokens=2500, keep_recent_messages=2), model="m")
    response = chat.send(Client(), "fix src/app.py")
    for _ in range(15):
        fc = response.function_calls[0]
        response = chat.send(
            Client(), [types.Part.from_function_response(name=fc.name, response={"output": "x " * 300})]
        )
    assert chat.results and all(isinstance(c, types.Content) for c in chat.contents)
    assert chat.contents[0].parts[0].text == "fix src/app.py"


def test_importing_the_package_and_the_integration_imports_no_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, context_compactor, context_compactor.integrations, context_compactor.integrations.gemini\n"
        "assert not [m for m in sys.modules if m.startswith('google')], 'google imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_mixed_list_keeps_each_content_in_its_own_type() -> None:
    contents = agent_run()
    mixed: list[Any] = [contents[0], *as_types(contents[1:])]
    result = ContextCompactor(max_context_tokens=200_000).micro_compact(mixed)
    rebuilt = [m for m in result.messages if not any(m is x for x in mixed)]
    assert rebuilt, "micro-compaction rewrote old responses"
    assert all(isinstance(m, types.Content) for m in rebuilt)
    assert validate_messages(result.messages) == []
