"""pydantic-ai ``ModelMessage`` lists and the history processor, through the real framework.

The end-to-end tests run a pydantic-ai ``Agent`` with ``FunctionModel`` (the framework's own
offline model) calling a tool for 30+ steps in a small window, the processor installed with
``capabilities=[ProcessHistory(...)]``, and check every history the model is handed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the [pydantic-ai] extra is not installed (it needs Python >= 3.11)")

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from context_compactor import (
    SUMMARY_MARKER,
    ConfigError,
    ContextCompactor,
    ConversationState,
    MessageTypeError,
    TokenCounter,
    detect_format,
    validate_messages,
)
from context_compactor.integrations.pydantic_ai import history_processor, pinned_indexes

TASK = "请检查 src/service.py 并修复 ConnectionError，然后运行测试。"


def conversation(n: int = 20, size: int = 800) -> list[ModelMessage]:
    msgs: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("You are careful."), UserPromptPart(TASK)])]
    for i in range(n):
        msgs.append(
            ModelResponse(
                parts=[
                    ThinkingPart(f"第{i}步", signature=f"s{i}"),
                    TextPart(f"reading src/mod_{i}.py"),
                    ToolCallPart("read_file", {"path": f"src/mod_{i}.py"}, tool_call_id=f"c{i}"),
                ]
            )
        )
        msgs.append(ModelRequest(parts=[ToolReturnPart("read_file", "x = 1\n" * (size // 6), tool_call_id=f"c{i}")]))
    return msgs


def anthropic_copy(msgs: list[ModelMessage]) -> list[dict[str, Any]]:
    """The same conversation as Anthropic Messages dicts (system prompt parts as text blocks)."""
    import json

    out: list[dict[str, Any]] = []
    for m in msgs:
        blocks: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ToolReturnPart):
                blocks.append({"type": "tool_result", "tool_use_id": p.tool_call_id, "content": p.content})
            elif isinstance(p, ToolCallPart):
                args = p.args if isinstance(p.args, dict) else json.loads(p.args or "{}")
                blocks.append({"type": "tool_use", "id": p.tool_call_id, "name": p.tool_name, "input": args})
            elif isinstance(p, ThinkingPart):
                blocks.append({"type": "thinking", "thinking": p.content, "signature": p.signature})
            else:
                blocks.append({"type": "text", "text": p.content})
        out.append({"role": "user" if isinstance(m, ModelRequest) else "assistant", "content": blocks})
    return out


@pytest.mark.parametrize("tokenizer", ["approx", "o200k_base"])
def test_a_history_counts_as_its_anthropic_copy(tokenizer: str) -> None:
    msgs = conversation()
    counter = TokenCounter(tokenizer)
    assert counter.count_messages(msgs) == counter.count_messages(anthropic_copy(msgs))
    assert detect_format(msgs) == "anthropic"
    assert validate_messages(msgs) == []


def test_parts_of_every_kind_are_read() -> None:
    with pytest.warns(Warning, match="RetryPromptPart"):  # the legacy part, still found in stored histories
        legacy = RetryPromptPart("bad args", tool_name="g", tool_call_id="2")
        feedback = RetryPromptPart("please answer in JSON")
    msgs: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart(["look", "at this"])]),
        ModelResponse(
            parts=[
                ToolCallPart("f", '{"a": 1}', tool_call_id="1"),
                ToolCallPart("g", None, tool_call_id="2"),
                ToolCallPart("h", {}, tool_call_id="3"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("f", {"rows": [1, 2]}, tool_call_id="1"),
                legacy,
                ToolReturnPart("h", "wrong arguments", tool_call_id="3", outcome="retried"),
            ]
        ),
        ModelResponse(parts=[CompactionPart("an earlier provider summary", provider_name="anthropic")]),
        ModelRequest(parts=[feedback]),
        ModelResponse(parts=[TextPart("ok")]),
    ]
    assert validate_messages(msgs) == []
    assert TokenCounter().count_messages(msgs) > 0
    assert pinned_indexes(msgs) == [0, 3]  # the system prompt (with the task), the compaction


def test_errors_name_the_index_field_and_format() -> None:
    bad = ModelResponse(parts=[ToolCallPart("f", {}, tool_call_id="1")])
    bad.parts[0].args = 5  # type: ignore[assignment]
    with pytest.raises(MessageTypeError) as e:
        TokenCounter().count_messages([ModelRequest(parts=[UserPromptPart("hi")]), bad])
    assert e.value.index == 1 and e.value.field == "parts[0].args"
    assert "pydantic-ai ModelResponse" in str(e.value) and "anthropic" in str(e.value)


def test_output_keeps_objects_and_builds_dataclasses() -> None:
    msgs = conversation(30)
    before = copy.deepcopy(msgs)
    result = ContextCompactor(max_context_tokens=5000).compact(msgs, pinned=pinned_indexes(msgs), force=True)
    assert msgs == before
    assert result.messages[0] is msgs[0]  # the system prompt and the task, pinned
    kept = {id(m) for m in msgs}
    new = [m for m in result.messages if id(m) not in kept]
    assert new and all(isinstance(m, (ModelRequest, ModelResponse)) for m in result.messages)
    summary = next(m for m in new if any(SUMMARY_MARKER in str(getattr(p, "content", "")) for p in m.parts))
    assert isinstance(summary, ModelRequest) and isinstance(summary.parts[0], UserPromptPart)
    assert validate_messages(result.messages) == []
    assert TokenCounter().count_messages(result.messages) == result.tokens_after
    # pydantic-ai's own (de)serialization takes the output.
    dumped = ModelMessagesTypeAdapter.dump_json(result.messages)
    assert len(ModelMessagesTypeAdapter.validate_json(dumped)) == len(result.messages)


def test_edited_messages_are_replaced_dataclasses() -> None:
    msgs = conversation(12, size=3000)
    result = ContextCompactor(max_context_tokens=9000, keep_recent_messages=2).compact(msgs)
    assert result.strategy in ("micro", "selective")
    edited = [m for m in result.messages if all(m is not x for x in msgs)]
    assert edited
    for m in edited:
        orig = next(x for x in msgs if x.timestamp == m.timestamp and type(x) is type(m))
        assert len(m.parts) <= len(orig.parts)
    assert validate_messages(result.messages) == []


def test_the_processor_needs_a_user_summary() -> None:
    with pytest.raises(ConfigError):
        history_processor(ContextCompactor(summary_role="system"))


# -- the agent, end to end -------------------------------------------------------------------------


def assert_valid_history(history: list[ModelMessage], window: int) -> None:
    assert validate_messages(history) == [], validate_messages(history)
    first = history[0]
    assert isinstance(first, ModelRequest)
    # The task first (pydantic-ai merges a summary request into the request before it).
    assert next(p.content for p in first.parts if isinstance(p, UserPromptPart)) == TASK
    assert any(isinstance(p, SystemPromptPart) for p in first.parts)
    calls: set[str] = set()
    for m in history:
        if isinstance(m, ModelRequest):
            returns = {p.tool_call_id for p in m.parts if isinstance(p, ToolReturnPart)}
            assert returns == calls, f"returns {returns} for calls {calls}"
            calls = set()
        else:
            assert not calls
            calls = {p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart)}
    assert TokenCounter().count_messages(history) <= window


class Scripted:
    """A ``FunctionModel`` function: calls ``read_file`` (twice in parallel every 5th step, with
    thinking every 3rd) for ``steps`` turns, then answers; records every history it is handed."""

    def __init__(self, steps: int = 32) -> None:
        self.steps = steps
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        n = len(self.seen)
        if n > self.steps:
            return ModelResponse(parts=[TextPart("全部完成 (all done).")])
        parts: list[Any] = [TextPart(f"Step {n}: reading src/mod_{n}.py.")]
        if n % 3 == 0:
            parts.insert(0, ThinkingPart(f"第{n}步：先读文件。", signature=f"sig{n}"))
        parts.append(ToolCallPart("read_file", {"path": f"src/mod_{n}.py"}, tool_call_id=f"call_{n}_a"))
        if n % 5 == 0:
            parts.append(ToolCallPart("read_file", {"path": f"tests/test_{n}.py"}, tool_call_id=f"call_{n}_b"))
        return ModelResponse(parts=parts)

    async def asynchronous(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return self(messages, info)


def make_agent(model: Any, processor: Any) -> Agent[None, str]:
    agent = Agent(model, system_prompt="You are a careful agent.", capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return f"# {path}\n" + "def f():\n    return '内容'\n" * 40

    return agent


@pytest.mark.parametrize(("asynchronous", "with_context"), [(False, False), (True, False), (False, True), (True, True)])
def test_agent_runs_30_tool_steps_in_a_small_window(asynchronous: bool, with_context: bool) -> None:
    compactor = ContextCompactor(max_context_tokens=3000, reserve_tokens=500, keep_recent_messages=4)
    script = Scripted()
    model = FunctionModel(script.asynchronous) if asynchronous else FunctionModel(script)
    agent = make_agent(model, compactor.pydantic_ai_processor(asynchronous=asynchronous, with_context=with_context))
    result = asyncio.run(agent.run(TASK)) if asynchronous else agent.run_sync(TASK)
    assert result.output == "全部完成 (all done)."
    assert len(script.seen) == script.steps + 1
    for history in script.seen:
        assert_valid_history(history, 2500)
    summaries = {
        p.content
        for h in script.seen
        for m in h
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str) and SUMMARY_MARKER in p.content
    }
    assert len(summaries) >= 3, len(summaries)
    # The run's history was rewritten (ProcessHistory writes the processed list back).
    assert len(result.all_messages()) < 2 * script.steps


def test_with_the_test_model() -> None:
    """pydantic-ai's TestModel calls every tool once, then answers: a short run that never
    compacts comes through unchanged."""
    compactor = ContextCompactor(max_context_tokens=100_000)
    agent = make_agent(TestModel(), history_processor(compactor))
    result = agent.run_sync(TASK)
    assert validate_messages(result.all_messages()) == []
    assert any(isinstance(p, ToolReturnPart) for m in result.all_messages() for p in m.parts)


def test_warm_check_with_a_state() -> None:
    msgs = conversation(30)
    compactor = ContextCompactor(max_context_tokens=50_000)
    state = ConversationState()
    compactor.check(msgs, state=state)
    more = [*msgs, ModelRequest(parts=[UserPromptPart("继续")])]
    assert compactor.check(more, state=state).current_tokens == TokenCounter().count_messages(more)


def test_context_processor_signature_takes_run_context() -> None:
    from pydantic_ai._utils import takes_run_context

    compactor = ContextCompactor()
    assert takes_run_context(history_processor(compactor, with_context=True))
    assert not takes_run_context(history_processor(compactor))
    assert RunContext is not None


def test_a_task_with_the_system_prompt_is_kept_whole() -> None:
    """The task's request holds the system prompt: it is pinned, never shortened; when it alone
    does not fit, the result says so (over_budget) instead of cutting the system prompt."""
    msgs = conversation(10, size=2000)
    msgs[0] = ModelRequest(
        parts=[SystemPromptPart("SYSTEM PROMPT " * 300), UserPromptPart("fix src/app.py " + "task " * 800)]
    )
    result = ContextCompactor(max_context_tokens=3000, task_max_tokens=300).compact(
        msgs, pinned=pinned_indexes(msgs), force=True
    )
    assert result.messages[0] is msgs[0]
    assert result.over_budget and validate_messages(result.messages) == []
