"""LangChain / LangGraph messages and the v1 agent middleware, through the real framework.

The end-to-end tests run ``langchain.agents.create_agent`` with a fake chat model that emits tool
calls (LangChain's own fake models lack ``bind_tools``) for 30+ tool-calling steps in a small
window, and check every history the model is handed."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the [langchain] extra is not installed (it needs Python >= 3.11)")
pytest.importorskip("langchain", reason="the [langchain] extra is not installed (it needs Python >= 3.11)")

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from context_compactor import (
    SUMMARY_MARKER,
    ContextCompactor,
    ConversationState,
    MessageTypeError,
    TokenCounter,
    detect_format,
    validate_messages,
)
from context_compactor.integrations.langchain import (
    ContextCompactorMiddleware,
    chat_model_summarizer,
    langgraph_pre_model_hook,
    to_langchain,
)

# -- reading ---------------------------------------------------------------------------------------


def _pair(i: int, text: str) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
    args = {"path": f"src/mod_{i}.py", "说明": "读取文件"}
    lc: list[BaseMessage] = [
        AIMessage(content=f"reading {i}", tool_calls=[{"name": "read", "args": args, "id": f"c{i}"}]),
        ToolMessage(content=text, tool_call_id=f"c{i}"),
    ]
    raw = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    oa = [
        {
            "role": "assistant",
            "content": f"reading {i}",
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": raw}}],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": text},
    ]
    return lc, oa


def conversation(n: int = 20, size: int = 800) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
    """The same run as LangChain messages and as Chat Completions dicts."""
    lc: list[BaseMessage] = [SystemMessage("You are a careful agent."), HumanMessage("修复 src/app.py 里的 KeyError")]
    oa: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "修复 src/app.py 里的 KeyError"},
    ]
    for i in range(n):
        a, b = _pair(i, f"第{i}个文件的内容 " + "x = 1\n" * (size // 6))
        lc += a
        oa += b
    return lc, oa


@pytest.mark.parametrize("tokenizer", ["approx", "o200k_base"])
def test_a_langchain_run_counts_as_its_chat_completions_copy(tokenizer: str) -> None:
    lc, oa = conversation()
    counter = TokenCounter(tokenizer)
    assert counter.count_messages(lc) == counter.count_messages(oa)
    assert detect_format(lc) == "openai"
    assert validate_messages(lc) == []


def test_every_entry_point_takes_langchain_messages() -> None:
    lc, oa = conversation()
    compactor = ContextCompactor(max_context_tokens=4000)
    assert compactor.check(lc) == compactor.check(oa)
    plan = compactor.plan(lc)
    assert plan.request is not None
    result = plan.apply(None)
    assert all(isinstance(m, BaseMessage) for m in result.messages)
    assert validate_messages(result.messages) == []


def test_provider_blocks_and_v1_blocks_are_read() -> None:
    """ChatAnthropic (thinking, tool_use copies of tool_calls), ChatOpenAI Responses (reasoning
    with a summary), v1 standard blocks, strings inside a list, invalid tool calls, chunks."""
    msgs: list[BaseMessage] = [
        HumanMessage(["look at this", {"type": "image", "url": "https://x.org/a.png"}]),
        AIMessage(
            content=[
                {"type": "thinking", "thinking": "I should read it", "signature": "sig"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}},
            ],
            tool_calls=[{"name": "read", "args": {"path": "a.py"}, "id": "t1"}],
        ),
        ToolMessage(content=[{"type": "text", "text": "print(1)"}], tool_call_id="t1", status="error"),
        AIMessage(
            content=[
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}], "id": "rs_1"},
                {"type": "reasoning", "reasoning": "v1 reasoning"},
                {"type": "text", "text": "done", "annotations": []},
                {"type": "non_standard", "value": {"x": "y"}},
            ],
            invalid_tool_calls=[
                {"name": "bad", "args": "{oops", "id": "t2", "error": "bad json", "type": "invalid_tool_call"}
            ],
        ),
        # ChatOpenAI sends invalid tool calls back as calls: they need their results too.
        ToolMessage(content="could not parse the arguments", tool_call_id="t2", status="error"),
        HumanMessage(content=["plain", "strings"]),
        AIMessageChunk(content="streamed"),
    ]
    assert validate_messages(msgs) == []
    assert detect_format(msgs) == "openai"
    assert TokenCounter().count_messages(msgs) > 0
    structure = ContextCompactor().check(msgs)
    assert structure.message_count == len(msgs)
    # Without the result, the invalid call is unanswered.
    assert [p.rule for p in validate_messages(msgs[:4] + msgs[5:])]


def test_errors_name_the_index_field_and_format() -> None:
    bad = AIMessage(content="x", tool_calls=[{"name": "f", "args": {}, "id": "1"}])
    bad.tool_calls[0]["args"] = "not a dict"  # type: ignore[typeddict-item]
    with pytest.raises(MessageTypeError) as e:
        TokenCounter().count_messages([HumanMessage("hi"), bad])
    assert e.value.index == 1
    assert e.value.field == "tool_calls[0].args"
    assert "LangChain AIMessage" in str(e.value) and "'ai'" in str(e.value).replace('"', "'")
    with pytest.raises(MessageTypeError) as e:
        validate_messages([HumanMessage("hi"), RemoveMessage(id="x")])
    assert e.value.index == 1 and "RemoveMessage" in str(e.value)


# -- output ----------------------------------------------------------------------------------------


def test_kept_messages_are_the_same_objects_and_new_ones_are_langchain_classes() -> None:
    lc, _ = conversation(30)
    before = copy.deepcopy(lc)
    result = ContextCompactor(max_context_tokens=5000).compact(lc)
    assert result.strategy != "none"
    assert lc == before  # not mutated
    ids = {id(m) for m in lc}
    new = [m for m in result.messages if id(m) not in ids]
    assert new and all(isinstance(m, BaseMessage) for m in result.messages)
    summary = next(m for m in result.messages if SUMMARY_MARKER in m.text)
    assert isinstance(summary, HumanMessage) and summary.id
    assert result.messages[0] is lc[0] and result.messages[1] is lc[1]  # system prompt and task
    assert validate_messages(result.messages) == []
    # The framework's own conversion takes the output.
    assert len(convert_to_openai_messages(result.messages)) == len(result.messages)
    assert TokenCounter().count_messages(result.messages) == result.tokens_after


def test_edited_messages_keep_their_class_and_id() -> None:
    """Micro-compaction edits old tool results and cuts long arguments: the edited copies are
    LangChain objects of the same class with the same id, and the calls keep dict ``args``."""
    lc: list[BaseMessage] = [HumanMessage("task: edit src/app.py")]
    for i in range(12):
        lc.append(
            AIMessage(
                content="", id=f"ai{i}", tool_calls=[{"name": "write", "args": {"text": "y" * 3000}, "id": f"w{i}"}]
            )
        )
        lc.append(ToolMessage(content="ok " * 800, tool_call_id=f"w{i}", id=f"t{i}"))
    result = ContextCompactor(max_context_tokens=12000, keep_recent_messages=2).compact(lc, force=True)
    edited = [m for m in result.messages if all(m is not x for x in lc)]
    assert edited
    for m in edited:
        assert isinstance(m, (AIMessage, ToolMessage, HumanMessage))
        if isinstance(m, AIMessage):
            assert m.id and all(isinstance(c["args"], dict) for c in m.tool_calls)
    assert validate_messages(result.messages) == []


def test_to_langchain_builds_each_role() -> None:
    assert isinstance(to_langchain({"role": "user", "content": "s"}), HumanMessage)
    ai = to_langchain(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
        }
    )
    assert isinstance(ai, AIMessage) and ai.tool_calls[0]["args"] == {}
    assert isinstance(to_langchain({"role": "tool", "tool_call_id": "1", "content": "r"}), ToolMessage)
    assert isinstance(to_langchain({"role": "system", "content": "s"}), SystemMessage)


# -- the agent, end to end -------------------------------------------------------------------------

TASK = "请检查 src/service.py 并修复 ConnectionError，然后运行测试。"


class ToolCallingFakeModel(BaseChatModel):
    """A chat model that calls ``read_file`` (sometimes twice in parallel, with thinking blocks)
    for ``steps`` turns and then answers; it records every history it is handed."""

    steps: int = 32
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "tool-calling-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFakeModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        n = len(self.seen)
        if n > self.steps:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("全部完成 (all done)."))])
        calls = [{"name": "read_file", "args": {"path": f"src/mod_{n}.py"}, "id": f"call_{n}_a"}]
        if n % 5 == 0:
            calls.append({"name": "read_file", "args": {"path": f"tests/test_{n}.py"}, "id": f"call_{n}_b"})
        content: list[Any] = [{"type": "text", "text": f"Step {n}: reading src/mod_{n}.py."}]
        if n % 3 == 0:
            content.insert(0, {"type": "thinking", "thinking": f"第{n}步：先读文件。", "signature": f"sig{n}"})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=content, tool_calls=calls))])


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + "def f():\n    return '内容'\n" * 40


def assert_valid_history(history: list[BaseMessage], window: int) -> None:
    """What the model is handed: valid for the provider, the task present, inside the window."""
    assert validate_messages(history) == [], validate_messages(history)
    users = [m for m in history if isinstance(m, HumanMessage)]
    assert users and users[0].text == TASK
    pending: set[str] = set()
    for m in history:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending, f"orphaned tool result {m.tool_call_id}"
            pending.discard(m.tool_call_id)
        else:
            assert not pending, f"calls without results: {pending}"
            if isinstance(m, AIMessage):
                pending = {c["id"] for c in m.tool_calls}
    assert TokenCounter().count_messages(history) <= window


def run_agent(rewrite_state: bool, asynchronous: bool) -> tuple[ToolCallingFakeModel, ContextCompactorMiddleware, Any]:
    window = 3000
    compactor = ContextCompactor(max_context_tokens=window, reserve_tokens=500, keep_recent_messages=4)
    middleware = ContextCompactorMiddleware(compactor, rewrite_state=rewrite_state)
    model = ToolCallingFakeModel()
    agent = create_agent(model, [read_file], system_prompt="You are a careful agent.", middleware=[middleware])
    inputs = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 500}
    state = asyncio.run(agent.ainvoke(inputs, config)) if asynchronous else agent.invoke(inputs, config)
    return model, middleware, state


@pytest.mark.parametrize(("rewrite_state", "asynchronous"), [(True, False), (True, True), (False, False)])
def test_agent_runs_30_tool_steps_in_a_small_window(rewrite_state: bool, asynchronous: bool) -> None:
    model, _middleware, state = run_agent(rewrite_state, asynchronous)
    assert len(model.seen) == model.steps + 1  # 32 tool-calling steps and the answer
    for history in model.seen:
        assert isinstance(history[0], SystemMessage)
        assert_valid_history(history[1:], 2500)
    # Compacted several times: the summary changes from one compaction to the next.
    summaries = {m.text for h in model.seen for m in h if isinstance(m, HumanMessage) and SUMMARY_MARKER in m.text}
    assert len(summaries) >= 3, len(summaries)
    final = state["messages"]
    assert final[-1].text == "全部完成 (all done)."
    if rewrite_state:
        # The state itself was rewritten: it holds the summary, not all 60+ messages.
        assert any(SUMMARY_MARKER in m.text for m in final)
        assert len(final) < 2 * model.steps
        assert len({m.id for m in final}) == len(final)
    else:
        # Only the model's input was compacted: the state keeps every message.
        assert not any(SUMMARY_MARKER in m.text for m in final)
        assert sum(isinstance(m, ToolMessage) for m in final) > model.steps


class _Summarizer(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "summary-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        assert isinstance(messages[0], SystemMessage)
        reply = AIMessage("<summary>The agent read many files of src/ for the user.</summary>")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_chat_model_as_the_summarizer(asynchronous: bool) -> None:
    lc, _ = conversation(30)
    compactor = ContextCompactor(
        max_context_tokens=5000, summarizer=chat_model_summarizer(_Summarizer(), asynchronous=asynchronous)
    )
    result = asyncio.run(compactor.acompact(lc)) if asynchronous else compactor.compact(lc)
    assert result.summary_source == "llm"
    assert "read many files" in (result.summary or "")


def test_the_legacy_pre_model_hook_changes_only_the_model_input() -> None:
    lc, _ = conversation(30)
    hook = langgraph_pre_model_hook(ContextCompactor(max_context_tokens=5000))
    out = hook({"messages": lc})["llm_input_messages"]
    assert len(out) < len(lc) and validate_messages(out) == []
    small = hook({"messages": lc[:4]})["llm_input_messages"]
    assert all(a is b for a, b in zip(small, lc[:4], strict=True))


def test_warm_check_with_a_state() -> None:
    lc, _ = conversation(30)
    compactor = ContextCompactor(max_context_tokens=50000)
    state = ConversationState()
    first = compactor.check(lc, state=state)
    lc2 = [*lc, HumanMessage("继续")]
    assert compactor.check(lc2, state=state).current_tokens == TokenCounter().count_messages(lc2)
    assert first.current_tokens == TokenCounter().count_messages(lc)


def test_a_session_stores_langchain_messages() -> None:
    """``Session.append`` takes LangChain messages (stored as the Chat Completions messages they
    stand for); the context converts back into LangChain messages."""
    from langchain_core.messages import convert_to_messages

    from context_compactor import Session

    lc, _ = conversation(30)
    with Session(compactor=ContextCompactor(max_context_tokens=5000), store=":memory:") as session:
        session.extend(lc)
        session.append(HumanMessage("继续"))
        result = session.prepare(force=True)
        assert result is not None and result.strategy != "none"
        context = session.context()
        assert validate_messages(context) == []
        back = convert_to_messages(context)
        assert isinstance(back[0], SystemMessage) and back[1].text == lc[1].text
        assert any(isinstance(m, ToolMessage) for m in back)


def test_a_tool_use_block_repeating_a_tool_call_counts_once() -> None:
    """ChatAnthropic keeps each call twice (a ``tool_use`` block and ``tool_calls``) and sends it
    once: it is counted once."""
    call = {"name": "read", "args": {"path": "src/a.py"}, "id": "t1"}
    block = {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "src/a.py"}}
    result = ToolMessage("print(1)", tool_call_id="t1")
    task = HumanMessage("read src/a.py")
    both = [task, AIMessage(content=[{"type": "text", "text": "Reading."}, block], tool_calls=[call]), result]
    calls_only = [task, AIMessage(content=[{"type": "text", "text": "Reading."}], tool_calls=[call]), result]
    counter = TokenCounter()
    assert counter.count_messages(both) == counter.count_messages(calls_only)
    assert validate_messages(both) == []
