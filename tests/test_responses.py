"""OpenAI Responses items as a wire format: reading, validity rules, repair, compaction of the
corpus converted to items, the SDK's input type, and a local stub of ``POST /v1/responses``
that answers the provider's 400 errors (``tests/_responses_stub.py``)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import context_compactor as cc
from _responses import encrypted, to_responses
from _responses_stub import ResponsesStub, problem

openai = pytest.importorskip("openai", reason="the openai SDK is a test dependency")
from openai.types.responses import ResponseInputParam  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

INPUT = TypeAdapter(ResponseInputParam)
REPO = Path(__file__).resolve().parent.parent


def corpus_files() -> list[Path]:
    """The corpus's OpenAI conversations (``$CORPUS_DIR``, else ``../shared/corpus`` as conftest,
    else ``../../shared/corpus`` for a worktree one level down)."""
    import os

    for root in (
        os.environ.get("CORPUS_DIR"),
        REPO.parent / "shared" / "corpus",
        REPO.parent.parent / "shared" / "corpus",
    ):
        if root and (Path(root) / "openai").is_dir():
            return sorted((Path(root) / "openai").glob("*.json"))
    return []


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def reasoning(k: int, encrypted_content: bool = True) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{k}", "summary": []}
    if encrypted_content:
        item["encrypted_content"] = encrypted(str(k))
    return item


def call(cid: str, args: str = '{"cmd": "ls"}') -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "bash", "arguments": args}


def output(cid: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def assistant(text: str, k: int = 0) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{k}",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def agent_run(n: int, out_chars: int = 1200) -> list[dict[str, Any]]:
    """A task, then ``n`` turns of reasoning + a call + its output, and a final answer."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "Be terse."},
        user("修复 src/app.py 里的 bug, see https://example.com/issue/7"),
    ]
    for k in range(n):
        items += [reasoning(k), call(f"call_{k}", json.dumps({"cmd": f"cat src/mod_{k}.py"}))]
        items.append(output(f"call_{k}", f"line {k}\n" * (out_chars // 8)))
    items.append(assistant("Done: fixed ValueError in src/app.py", n))
    return items


def created(inp: list[Any], out: list[Any]) -> list[Any]:
    """Output items that are not input objects (the ones the library made or edited)."""
    ids = {id(m) for m in inp}
    return [m for m in out if id(m) not in ids]


def reasoning_kept_with_follower(inp: list[Any], out: list[Any]) -> list[str]:
    """Every reasoning item of the output is an input object, followed by the same item as in the input."""
    pos = {id(m): i for i, m in enumerate(inp)}
    bad = []
    for j, m in enumerate(out):
        t = m.get("type") if isinstance(m, dict) else getattr(m, "type", None)
        if t != "reasoning":
            continue
        if id(m) not in pos:
            bad.append(f"{j}: a reasoning item that is not the input object")
            continue
        i = pos[id(m)]
        if j + 1 >= len(out) or i + 1 >= len(inp) or out[j + 1] is not inp[i + 1]:
            bad.append(f"{j}: reasoning item separated from its following item")
    return bad


# -- reading and detection -------------------------------------------------------------------------


def test_detection_and_counting() -> None:
    items = agent_run(3)
    assert cc.validate_messages(items) == []
    check = cc.ContextCompactor().check(items)
    assert check.format == "responses"
    assert check.message_count == len(items)
    # An easy input message (no type) next to items is still a Responses list.
    assert cc.ContextCompactor().check([{"role": "user", "content": "hi"}, call("a")]).format == "responses"
    # `format="responses"` forces it.
    assert cc.ContextCompactor().check([{"role": "user", "content": "hi"}], format="responses").format == "responses"


def test_bad_types_name_item_field_and_format() -> None:
    items = [user("go"), {"type": "function_call", "call_id": "a", "name": "bash", "arguments": 3}]
    with pytest.raises(cc.MessageTypeError) as e:
        cc.validate_messages(items)
    assert e.value.index == 1
    assert e.value.field == "arguments"
    assert "responses" in str(e.value) and "function_call" in str(e.value)
    with pytest.raises(cc.ConfigError):
        cc.validate_messages(items, format="gemini-ish")


def test_unknown_and_server_items_pass_through_and_count() -> None:
    web = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}}
    future = {"type": "brand_new_item", "payload": "the quick brown fox jumps " * 40}
    items = [user("go"), web, future, assistant("ok")]
    assert cc.validate_messages(items) == []
    counter = cc.TokenCounter("approx")
    assert counter.count_messages([future]) > counter.count_messages([user("")]) + 50


# -- validity rules --------------------------------------------------------------------------------


def rules(items: list[Any], **kw: Any) -> list[tuple[int | None, str]]:
    return [(p.index, p.rule) for p in cc.validate_messages(items, **kw)]


def test_each_rule_is_named_with_the_item_index() -> None:
    assert rules([user("go"), output("x")]) == [(1, "orphan_output")]
    assert rules([user("go"), call("a"), user("next")]) == [(2, "missing_output")]
    assert rules([user("go"), call("a")]) == []  # a trailing call may wait
    assert rules([user("go"), call("a"), output("a"), call("a"), output("a")])[0] == (3, "duplicate_call_id")
    assert rules([user("go"), reasoning(1), user("next")]) == [(1, "reasoning_without_item")]
    assert rules([user("go"), reasoning(1), reasoning(2), call("a"), output("a")]) == []


def test_stateless_profile() -> None:
    items = [
        user("go"),
        reasoning(1, encrypted_content=False),
        assistant("ok"),
        {"type": "item_reference", "id": "msg_9"},
    ]
    assert rules(items) == []
    assert rules(items, profile="responses_stateless") == [(1, "reasoning_not_stored"), (3, "item_reference_stateless")]
    with ResponsesStub() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="test")
        with pytest.raises(openai.BadRequestError, match="Items are not persisted when `store` is set to false"):
            client.responses.create(model="m", input=items, store=False)


def test_repair_makes_a_request_the_stub_accepts() -> None:
    items = [user("go"), output("zz"), reasoning(0), call("a"), reasoning(1), user("next"), call("b"), call("b")]
    r = cc.ContextCompactor().compact(items, format="responses", force=False)
    assert {e.index for e in r.record} >= {1, 4}
    assert any("synthetic output" in x for x in r.repairs)
    assert cc.validate_messages(r.messages, format="responses") == []
    INPUT.validate_python(created(items, r.messages))
    with ResponsesStub() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="test")
        client.responses.create(model="m", input=r.messages)
    with pytest.raises(cc.InvalidConversationError) as e:
        cc.ContextCompactor(repair=False).compact(items)
    assert {p.rule for p in e.value.problems} >= {"orphan_output", "missing_output", "reasoning_without_item"}


# -- the stub is meaningful ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "store", "text"),
    [
        ([user("go"), output("call_9")], True, "No tool call found for function call output with call_id call_9."),
        (
            [user("go"), reasoning(3), user("more")],
            True,
            "Item 'rs_3' of type 'reasoning' was provided without its required following item.",
        ),
        ([user("go"), reasoning(4, False), assistant("a")], False, "Item with id 'rs_4' not found."),
        ([user("go"), call("a"), output("a"), call("a"), output("a")], True, "Duplicate item found with id a."),
        ([user("go"), call("a"), user("and?")], True, "No tool output found for function call a."),
    ],
)
def test_stub_rejects_what_the_provider_rejects(items: list[Any], store: bool, text: str) -> None:
    with ResponsesStub() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="test", max_retries=0)
        with pytest.raises(openai.BadRequestError) as e:
            client.responses.create(model="m", input=items, store=store)
    assert text in str(e.value)
    assert problem({"input": items, "store": store}) is not None


# -- compaction ------------------------------------------------------------------------------------


def test_compaction_keeps_reasoning_with_its_item_and_items_as_objects() -> None:
    items = agent_run(60)
    before = copy.deepcopy(items)
    c = cc.ContextCompactor(max_context_tokens=8000, keep_recent_messages=4)
    r = c.compact(items, force=True)
    assert items == before
    assert r.tokens_after <= c.config.soft_threshold or r.over_budget
    assert cc.validate_messages(r.messages, format="responses") == []
    assert reasoning_kept_with_follower(items, r.messages) == []
    new = created(items, r.messages)
    INPUT.validate_python(new)
    summary = [m for m in new if m.get("type") == "message" and "input_text" in json.dumps(m)]
    assert summary, "the summary is a message item with input_text parts"
    assert items[1] in r.messages and any(m is items[1] for m in r.messages), "the task is kept as the same object"
    with ResponsesStub() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="test", max_retries=0)
        client.responses.create(model="m", input=r.messages)


def test_summary_role_developer() -> None:
    items = agent_run(40)
    r = cc.ContextCompactor(max_context_tokens=6000, summary_role="developer").compact(items, force=True)
    summary = next(
        m
        for m in created(items, r.messages)
        if m.get("role") in ("developer", "user") and "summary" in json.dumps(m).lower()
    )
    assert summary["role"] == "developer"
    assert summary["content"][0]["type"] == "input_text"
    INPUT.validate_python(created(items, r.messages))


def test_sdk_output_items_are_read_by_attribute_and_kept_as_objects() -> None:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseReasoningItem

    items: list[Any] = [user("summarise src/a.py")]
    for k in range(40):
        items.append(
            ResponseReasoningItem(id=f"rs_{k}", type="reasoning", summary=[], encrypted_content=encrypted(str(k)))
        )
        items.append(
            ResponseFunctionToolCall(
                type="function_call",
                call_id=f"c{k}",
                name="read",
                arguments='{"p": "src/a.py"}',
                id=f"fc_{k}",
                status="completed",
            )
        )
        items.append(output(f"c{k}", "x" * 2000))
    items.append(
        ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[{"type": "output_text", "text": "done", "annotations": []}],
        )
    )
    assert cc.validate_messages(items) == []
    r = cc.ContextCompactor(max_context_tokens=8000).compact(items, force=True)
    assert cc.validate_messages(r.messages, format="responses") == []
    assert reasoning_kept_with_follower(items, r.messages) == []
    assert r.messages[-1] is items[-1]
    with ResponsesStub() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="test", max_retries=0)
        client.responses.create(model="m", input=r.messages)  # the SDK objects as they are


def test_compaction_items_are_fixed() -> None:
    items = [
        user("task: fix src/app.py"),
        {"type": "compaction", "id": "cmp_1", "encrypted_content": encrypted("c", 2000)},
    ]
    items += agent_run(40)[2:]
    r = cc.ContextCompactor(max_context_tokens=8000).compact(items, force=True)
    assert any(m is items[1] for m in r.messages), "the provider's compaction item is kept as it is"
    assert cc.validate_messages(r.messages, format="responses") == []


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_corpus_converted_validates_and_compacts(path: Path) -> None:
    chat = json.loads(path.read_text(encoding="utf-8"))
    items = to_responses(chat)
    chat_rules = sorted({p.rule for p in cc.validate_messages(chat)})
    got = sorted({p.rule for p in cc.validate_messages(items)})
    assert got == [{"missing_tool_result": "missing_output"}.get(r, r) for r in chat_rules]
    size = cc.TokenCounter("approx").count_messages(items)
    new_items: list[Any] = []
    with ResponsesStub() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="test", max_retries=0)
        for share in (0.1, 0.4):
            budget = max(200, int(size * share))
            c = cc.ContextCompactor(max_context_tokens=budget + budget // 4, reserve_tokens=budget // 4)
            r = c.compact(items, force=True)
            assert cc.validate_messages(r.messages, format="responses") == []
            assert reasoning_kept_with_follower(items, r.messages) == []
            assert r.tokens_after <= c.config.soft_threshold or r.over_budget
            new_items += created(items, r.messages)
            client.responses.create(model="m", input=r.messages)
    INPUT.validate_python(new_items)


# -- Session and the summarizer ---------------------------------------------------------------------


def test_session_with_responses_items(tmp_path: Path) -> None:
    items = agent_run(50)
    c = cc.ContextCompactor(max_context_tokens=8000)
    with cc.Session("r1", compactor=c, store=str(tmp_path / "s.db"), format="responses") as s:
        s.extend(items)
        result = s.prepare()
        assert result is not None and result.tokens_after < result.tokens_before
        ctx = s.context()
        assert cc.validate_messages(ctx, format="responses") == []
        assert [m.get("type") for m in ctx].count("reasoning") >= 1
        with ResponsesStub() as stub:
            openai.OpenAI(base_url=stub.base_url, api_key="test", max_retries=0).responses.create(model="m", input=ctx)


def test_summarizer_request_is_chat_style_with_items_rendered() -> None:
    items = agent_run(30)
    seen: list[Any] = []

    def summarizer(request: Any) -> str:
        seen.append(request)
        return "<summary>Read the modules; fixed the bug in src/app.py.</summary>"

    r = cc.ContextCompactor(max_context_tokens=6000, summarizer=summarizer).compact(items, force=True)
    assert r.summary_source == "llm"
    req = seen[0]
    assert [m["role"] for m in req.messages] == ["system", "user"]
    transcript = req.messages[1]["content"]
    assert "bash" in transcript and "src/mod_0.py" in transcript, "function_call items are rendered"
    assert "gAAAA" not in transcript, "encrypted reasoning is not sent to the summarizer"
    INPUT.validate_python(created(items, r.messages))


def codex_rollout() -> list[dict[str, Any]]:
    """The real Codex CLI rollout of the corpus (older layout): its items, without the header line
    and the ``record_type: state`` lines (``io.load`` will read this layout itself)."""
    files = corpus_files()
    if not files:
        pytest.skip("shared corpus not found (set CORPUS_DIR)")
    path = files[0].parent.parent / "responses" / "codex-session-viewer_example.jsonl"
    lines = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return [d for d in lines if "type" in d]


@pytest.mark.parametrize("share", [0.05, 0.3])
def test_real_codex_rollout(share: float) -> None:
    items = codex_rollout()
    assert len(items) == 741 and sum(1 for i in items if i["type"] == "reasoning") == 143
    assert cc.validate_messages(items) == [] and problem({"input": items}) is None
    size = cc.TokenCounter("approx").count_messages(items)
    budget = int(size * share)
    c = cc.ContextCompactor(max_context_tokens=budget + budget // 4, reserve_tokens=budget // 4)
    before = copy.deepcopy(items)
    r = c.compact(items)
    assert items == before
    assert r.tokens_after <= c.config.soft_threshold or r.over_budget
    assert cc.validate_messages(r.messages, format="responses") == []
    assert reasoning_kept_with_follower(items, r.messages) == []
    INPUT.validate_python(created(items, r.messages))
    with ResponsesStub() as stub:
        openai.OpenAI(base_url=stub.base_url, api_key="test", max_retries=0).responses.create(
            model="m", input=r.messages
        )
