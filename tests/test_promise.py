"""The library's promise, as a user sees it: never over the window without saying so, never
without the task, thinking loops compacted legally, the summarizer reading real content, and a
result that says truthfully what was done (strategy, summary_source, fallback_reason, origins)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import claude_code_corpus_files
from context_compactor import (
    ContextCompactor,
    ConversationState,
    SummaryRequest,
    TokenCounter,
    validate_messages,
)
from context_compactor.io import load


def agent_run(rounds: int, task: str = "Fix the failing test in /srv/app/billing/tax.py.") -> list[dict[str, Any]]:
    """An OpenAI-format agent run: the task, then tool rounds with large outputs."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    msgs.append({"role": "user", "content": task})
    for i in range(rounds):
        cid = f"call_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: reading the module.",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"cmd": "cat m{i}.py"}}'},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"OUTPUT-OF-ROUND-{i} " + "x = 1\n" * 300})
    return msgs


def thinking_loop(rounds: int) -> list[dict[str, Any]]:
    """An Anthropic agent run with interleaved thinking: one user message, then one assistant turn
    of `rounds` tool blocks, each assistant message opening with a signed thinking block."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Refactor /srv/app/db.py to use a pool."}]
    for i in range(rounds):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"Round {i}: what next? " * 20, "signature": f"sig{i}"},
                    {"type": "tool_use", "id": f"tu{i}", "name": "bash", "input": {"cmd": f"cat part{i}.py"}},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"tu{i}", "content": "def f():\n    pass\n" * 150}],
            }
        )
    return msgs


def test_a_thinking_loop_is_compacted_between_its_thinking_messages() -> None:
    msgs = thinking_loop(30)
    total = TokenCounter().count_messages(msgs, format="anthropic")
    c = ContextCompactor(max_context_tokens=total // 3, reserve_tokens=total // 30)
    r = c.compact(msgs)
    assert r.strategy in ("summary", "rule_summary") and not r.over_budget
    assert r.tokens_after <= c.config.soft_threshold
    assert validate_messages(r.messages, format="anthropic") == []
    # The task, then the summary (a user message: a new turn), then kept messages unchanged; the
    # first kept assistant message opens with its thinking block.
    assert r.messages[0] is msgs[0] and r.origins[1] == ("summary", None)
    first_assistant = next(m for m in r.messages if m["role"] == "assistant")
    assert first_assistant["content"][0]["type"] == "thinking"
    kept_assistants = [m for m in r.messages if m["role"] == "assistant"]
    assert all(any(m is o for o in msgs) for m in kept_assistants), "assistant messages come back as they were"


def test_a_thinking_loop_without_interleaved_thinking_still_fits() -> None:
    # Only the first assistant message thinks: no cut is legal inside the loop, so the tool output
    # inside it is cut head + tail instead (the last step before over_budget).
    msgs = thinking_loop(12)
    for m in msgs[3::2]:
        m["content"] = m["content"][1:]
    total = TokenCounter().count_messages(msgs, format="anthropic")
    c = ContextCompactor(max_context_tokens=total // 3, reserve_tokens=total // 30)
    r = c.compact(msgs)
    assert not r.over_budget and r.tokens_after <= c.config.soft_threshold
    assert validate_messages(r.messages, format="anthropic") == []
    assert {e.action for e in r.record} >= {"shortened"}
    assert all(any(m is o for o in msgs) for m in r.messages if m["role"] == "assistant")


@pytest.mark.parametrize("path", claude_code_corpus_files(), ids=lambda p: p.name)
def test_claude_code_sessions_fit_at_30_percent(path: Path) -> None:
    t = load(path)
    total = TokenCounter().count_messages(t.messages, system=t.system, format="anthropic")
    c = ContextCompactor(max_context_tokens=max(total * 3 // 10, 64))
    r = c.compact(t.messages, system=t.system)
    assert validate_messages(r.messages, format="anthropic", system=r.system) == []
    assert r.tokens_after <= c.config.soft_threshold or r.over_budget
    task = t.messages[0]
    assert any(m is task for m in r.messages) or ("edited", 0) in r.origins


def test_the_task_is_shortened_never_removed() -> None:
    task = "Fix the failing test in /srv/app/billing/tax.py, see https://example.com/bug/7. " + "Context. " * 3000
    msgs = agent_run(10, task)
    c = ContextCompactor(max_context_tokens=4000, reserve_tokens=500)
    r = c.compact(msgs)
    assert not r.over_budget and r.tokens_after <= c.config.soft_threshold
    assert r.origins[1] == ("edited", 1)
    assert [e.action for e in r.record if e.index == 1] == ["shortened"]
    kept = r.messages[1]["content"]
    assert kept.startswith("Fix the failing test in /srv/app/billing/tax.py") and "chars omitted" in kept
    # By the least amount (DESIGN, "The task"): task_max_tokens is a floor, not a target; the
    # result ends just under the soft threshold rather than far below it.
    assert c.counter.count(kept) >= c.config.task_token_limit
    assert r.tokens_after >= 0.85 * c.config.soft_threshold
    assert "https://example.com/bug/7" in kept


def test_the_task_stays_even_with_keep_first_messages_0() -> None:
    msgs = agent_run(20)
    c = ContextCompactor(max_context_tokens=6000, reserve_tokens=500, keep_first_messages=0)
    r = c.compact(msgs)
    assert r.compacted and any(m is msgs[1] for m in r.messages)


def test_the_summarizer_reads_the_tool_output_not_this_compactions_placeholders() -> None:
    seen: list[SummaryRequest] = []

    def summarize(req: SummaryRequest) -> str:
        seen.append(req)
        return "<summary>Read the modules; nothing fixed yet.</summary>"

    msgs = agent_run(12)
    c = ContextCompactor(max_context_tokens=5000, reserve_tokens=500, summarizer=summarize, keep_recent_tool_results=1)
    r = c.compact(msgs)
    assert any(p == "micro" for p, _ in r.phases), "micro ran in this compaction"
    prompts = "\n".join(req.user_prompt for req in seen)
    assert "OUTPUT-OF-ROUND-0" in prompts and "OUTPUT-OF-ROUND-5" in prompts
    assert "[context-compactor:" not in prompts
    # The task is shown as context (it stays in the conversation).
    assert "<task>" in seen[0].user_prompt and "/srv/app/billing/tax.py" in seen[0].user_prompt


def test_strategy_and_summary_source_say_what_was_done() -> None:
    msgs = agent_run(20)
    llm = ContextCompactor(max_context_tokens=6000, reserve_tokens=500, summarizer=lambda req: "<summary>ok</summary>")
    r = llm.compact(msgs)
    assert (r.strategy, r.summary_source, r.fallback_reason) == ("summary", "llm", None)

    def failing(req: SummaryRequest) -> str:
        raise TimeoutError("slow")

    r = ContextCompactor(max_context_tokens=6000, reserve_tokens=500, summarizer=failing).compact(msgs)
    assert (r.strategy, r.summary_source) == ("rule_summary", "rule")
    assert r.fallback_reason and "TimeoutError" in r.fallback_reason

    r = ContextCompactor(max_context_tokens=6000, reserve_tokens=500).compact(msgs)
    assert (r.strategy, r.summary_source) == ("rule_summary", "rule")
    none = ContextCompactor().compact(msgs)
    assert (none.strategy, none.summary_source) == ("none", None)


def test_cooldown_uses_the_rule_summary_when_micro_is_not_enough() -> None:
    calls: list[SummaryRequest] = []
    state = ConversationState()

    def failing(req: SummaryRequest) -> str:
        raise ConnectionError("down")

    ContextCompactor(max_context_tokens=6000, reserve_tokens=500, cooldown_calls=2, summarizer=failing).compact(
        agent_run(20), state=state
    )
    assert state.cooldown_remaining == 2
    ok = ContextCompactor(
        max_context_tokens=6000,
        reserve_tokens=500,
        cooldown_calls=2,
        summarizer=lambda req: calls.append(req) or "<summary>ok</summary>",
    )
    r = ok.compact(agent_run(30), state=state)
    assert not calls, "no LLM call during the cool-down"
    assert r.summary_source == "rule" and not r.over_budget and r.tokens_after <= ok.config.soft_threshold


def test_min_savings_refuses_only_below_the_hard_threshold() -> None:
    msgs = agent_run(6)
    total = TokenCounter().count_messages(msgs)
    # Above the hard threshold: compacted whatever it saves.
    above = ContextCompactor(max_context_tokens=total, reserve_tokens=total // 10, min_savings_ratio=0.99)
    r = above.compact(msgs)
    assert r.compacted and r.tokens_after <= above.config.soft_threshold
    # Below the thresholds, forced (`/compact`): a saving under the ratio is refused.
    below = ContextCompactor(
        max_context_tokens=total * 2, reserve_tokens=1, soft_threshold_tokens=total + 100, min_savings_ratio=0.99
    )
    r = below.compact(msgs, force=True)
    assert r.strategy == "none" and "min_savings_ratio" in (r.reason or "")
    assert not r.over_budget and r.messages == msgs


def test_over_budget_names_the_parts_that_do_not_fit() -> None:
    system = "You are a coding agent. " * 400
    msgs = [{"role": "system", "content": system}, *agent_run(4)[1:]]
    c = ContextCompactor(max_context_tokens=1200, reserve_tokens=100)
    r = c.compact(msgs)
    assert r.over_budget and r.tokens_after > c.config.soft_threshold
    assert "system prompt and tools" in (r.over_budget_reason or "")
    assert any(m is msgs[1] for m in r.messages) or ("edited", 1) in r.origins
