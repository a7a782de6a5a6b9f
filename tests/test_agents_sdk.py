"""The OpenAI Agents SDK adapter, tested through the SDK itself: ``Runner.run`` with the SDK's own
offline ``ScriptedModel`` (a fake ``Model`` that returns tool calls), our session and our
``call_model_input_filter``. Every model call's input is checked where the model receives it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="openai-agents is not installed (extra [agents])")

from agents import Agent, RunConfig, Runner, function_tool  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from _responses import to_responses  # noqa: E402
from conftest import corpus_or_skip, openai_corpus_files  # noqa: E402
from context_compactor import ContextCompactor, StoreError, validate_messages  # noqa: E402
from context_compactor.integrations.agents import (  # noqa: E402
    CompactingSession,
    input_filter,
    legal_suffix,
)

TASK = "Audit every module under src/ and report which ones read 配置文件 config/settings.toml; never edit files."
INSTRUCTIONS = "You are a careful code auditor."

# No trace export (it would try the network).
agents.set_tracing_disabled(True)

_ITEMS = TypeAdapter(list[agents.items.TResponseInputItem])  # type: ignore[name-defined]


def _module_text(path: str) -> str:
    body = "\n".join(f"    value_{i} = load('{path}')  # 读取配置 line {i}" for i in range(40))
    return f"# {path}\ndef main():\n{body}\n"


@function_tool
def read_file(path: str) -> str:
    """Read a source file."""
    return _module_text(path)


class Checked:
    """What every model call received: validity, size, and the task."""

    def __init__(self, compactor: ContextCompactor) -> None:
        self.compactor = compactor
        self.calls = 0
        self.max_tokens = 0

    def check(self, system: str | None, items: Any) -> None:
        items = list(items)
        self.calls += 1
        problems = validate_messages(items, format="responses", system=system)
        assert problems == [], (self.calls, problems)
        tokens = self.compactor.check(items, system=system, format="responses").current_tokens
        assert tokens <= self.compactor.config.budget, (self.calls, tokens)
        self.max_tokens = max(self.max_tokens, tokens)
        texts = json.dumps(_ITEMS.dump_python(_ITEMS.validate_python(items), mode="json"), ensure_ascii=False)
        assert "Audit every module" in texts, f"call {self.calls}: the task is missing"


def _script(steps: int, checked: Checked, prefix: str = "") -> ScriptedModel:
    def responder(k: int):
        def respond(call: Any) -> Any:
            checked.check(call.system_instructions, call.input)
            if k < steps:
                return [function_call("read_file", {"path": f"src/{prefix}mod_{k}.py"}, call_id=f"call_{prefix}{k}")]
            return [assistant_message(f"Done: {steps} modules read.")]

        return respond

    return ScriptedModel([ModelStep.respond(responder(k)) for k in range(steps + 1)])


def test_input_filter_keeps_a_35_step_run_inside_the_window() -> None:
    compactor = ContextCompactor(max_context_tokens=4000, keep_recent_messages=4)
    checked = Checked(compactor)
    model = _script(35, checked)
    agent = Agent(name="auditor", instructions=INSTRUCTIONS, model=model, tools=[read_file])
    flt = input_filter(compactor)
    result = asyncio.run(Runner.run(agent, TASK, run_config=RunConfig(call_model_input_filter=flt), max_turns=60))
    assert result.final_output == "Done: 35 modules read."
    assert checked.calls == 36
    assert flt.compactions >= 3, flt.compactions  # type: ignore[attr-defined]
    # Without the filter, the same run goes over the window long before its end.
    raw = [m for m in result.to_input_list()]
    assert compactor.check(raw, system=INSTRUCTIONS, format="responses").current_tokens > compactor.config.budget


def test_session_across_runs_compacts_and_never_sends_an_invalid_history(tmp_path: Any) -> None:
    compactor = ContextCompactor(max_context_tokens=16000, keep_recent_messages=4)
    checked = Checked(compactor)
    session = CompactingSession("audit", compactor=compactor, store=tmp_path / "agent.db", instructions=INSTRUCTIONS)
    steps = 0
    try:
        for run in range(6):
            model = _script(6, checked, prefix=f"r{run}_")
            agent = Agent(name="auditor", instructions=INSTRUCTIONS, model=model, tools=[read_file])
            prompt = TASK if run == 0 else f"继续 (part {run}): read the next six modules."
            # The session compacts between runs; the filter inside a run (the SDK reads a session
            # only when a run starts, and six reads of a module can outgrow what is left).
            config = RunConfig(call_model_input_filter=input_filter(compactor))
            result = asyncio.run(Runner.run(agent, prompt, session=session, run_config=config, max_turns=20))
            assert result.final_output == "Done: 6 modules read."
            steps += 6
        assert steps >= 30
        assert len(session.inner.compactions()) >= 2
        # Everything is still there: the history holds every original item.
        history = session.inner.history()
        assert sum(1 for i in history if i.get("type") == "function_call") == 36
    finally:
        session.close()
    # Reopened from the file, the session goes on where it was.
    again = CompactingSession("audit", compactor=compactor, store=tmp_path / "agent.db", instructions=INSTRUCTIONS)
    try:
        items = asyncio.run(again.get_items())
        assert validate_messages(items, format="responses", system=INSTRUCTIONS) == []
        assert "Audit every module" in json.dumps(items, ensure_ascii=False)
    finally:
        again.close()


def test_session_protocol_operations() -> None:
    compactor = ContextCompactor(max_context_tokens=200_000)
    session = CompactingSession("ops", compactor=compactor)
    assert isinstance(session, agents.memory.session.SessionABC)
    assert agents.memory.session.is_openai_responses_compaction_aware_session(session)

    async def go() -> None:
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items(
            [
                {"role": "user", "content": "列出 src/ 下的文件"},
                {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": '{"path": "src"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "app.py\nutil.py"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two."}]},
            ]
        )
        assert len(await session.get_items()) == 4
        # limit: the last items, never an output without its call.
        assert [i.get("type") for i in await session.get_items(2)] == ["function_call_output", "message"][1:]
        assert len(await session.get_items(3)) == 3
        popped = await session.pop_item()
        assert popped is not None and popped["role"] == "assistant"
        assert len(await session.get_items()) == 3
        await session.run_compaction({"force": True})
        # After a forced compaction the remaining originals were compacted: nothing to pop back.
        if session.last_result is not None and session.last_result.compacted_count:
            with pytest.raises(StoreError):
                await session.pop_item()
        await session.clear_session()
        assert await session.get_items() == []

    try:
        asyncio.run(go())
    finally:
        session.close()


def test_session_settings_limit_applies() -> None:
    compactor = ContextCompactor(max_context_tokens=200_000)
    session = CompactingSession(
        "limited", compactor=compactor, session_settings=agents.memory.session_settings.SessionSettings(limit=1)
    )
    try:
        asyncio.run(session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]))
        assert asyncio.run(session.get_items()) == [{"role": "user", "content": "b"}]
    finally:
        session.close()


def test_legal_suffix_drops_orphans_and_lone_reasoning() -> None:
    items = [
        {"role": "user", "content": "t"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "y"},
    ]
    assert legal_suffix(items, 2) == []
    assert legal_suffix(items, 4) == items[1:4]
    assert legal_suffix(items, None) == items


@pytest.mark.parametrize("path", openai_corpus_files(), ids=lambda p: p.stem[:40])
def test_corpus_through_the_session_is_valid_for_the_sdk(path: Any) -> None:
    corpus_or_skip()
    name = path.stem
    items = to_responses(json.loads(path.read_text(encoding="utf-8")))
    total = ContextCompactor().check(items, format="responses").current_tokens
    compactor = ContextCompactor(max_context_tokens=max(2000, int(total * 0.3)))
    session = CompactingSession(name, compactor=compactor)
    try:
        asyncio.run(session.add_items(items))
        out = asyncio.run(session.get_items())
        result = session.last_result
        assert validate_messages(out, format="responses") == []
        _ITEMS.validate_python(out)
        first_user = next(i for i in items if i.get("role") == "user")
        head = json.dumps(first_user["content"], ensure_ascii=False)[:40].strip('"[{')
        assert result is None or result.over_budget or head[:20] in json.dumps(out, ensure_ascii=False)
        tokens = compactor.check(out, format="responses").current_tokens
        assert tokens <= compactor.config.budget or (result is not None and result.over_budget)
    finally:
        session.close()


def test_compacting_session_takes_compactor_and_store_by_keyword(tmp_path: Any) -> None:
    """The old positional CompactingSession(session_id, compactor, store) still works, warned."""
    compactor = ContextCompactor(max_context_tokens=200_000)
    with pytest.warns(DeprecationWarning, match="compactor=..., store=..."):
        old = CompactingSession("legacy", compactor, tmp_path / "a.db")
    asyncio.run(old.add_items([{"role": "user", "content": "hi"}]))
    old.close()
    new = CompactingSession("legacy", compactor=compactor, store=tmp_path / "a.db")
    assert asyncio.run(new.get_items()) == [{"role": "user", "content": "hi"}]
    new.close()
