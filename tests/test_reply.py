"""Reading a summarizer's reply: a reasoning model's thinking never reaches the summary, whatever
the summarizer (here a plain callable, as `openai_chat` against Ollama or vLLM returns it)."""

from __future__ import annotations

import pytest

from context_compactor import ContextCompactor, SummaryRequest, _core


def _conversation() -> list[dict[str, str]]:
    msgs = [{"role": "user", "content": "Refactor billing/tax.py and keep the API stable."}]
    for i in range(30):
        msgs.append({"role": "assistant", "content": f"Step {i}: edited billing/tax.py. " * 40})
        msgs.append({"role": "user", "content": f"continue {i}"})
    return msgs


@pytest.mark.parametrize(
    "reply",
    [
        "<think>\nThe user wants a summary.\n</think>\n<summary>Refactored billing/tax.py.</summary>",
        "<think>plan</think>\n\nRefactored billing/tax.py.",
        "Reasoning the template opened.\n</think>\n\nRefactored billing/tax.py.",
        "<THINK>大写标签</THINK>Refactored billing/tax.py.",
    ],
)
def test_think_is_not_in_the_summary(reply: str) -> None:
    def summarizer(request: SummaryRequest) -> str:
        return reply

    compactor = ContextCompactor(max_context_tokens=6_000, reserve_tokens=500, summarizer=summarizer)
    result = compactor.compact(_conversation())
    assert result.summary_source == "llm"
    assert result.summary is not None
    assert "think" not in result.summary.lower() and "reasoning" not in result.summary.lower()
    assert "Refactored billing/tax.py." in result.summary


def test_a_reply_that_is_only_thinking_falls_back() -> None:
    def summarizer(request: SummaryRequest) -> str:
        return "<think>I ran out of tokens while thinking about the"

    compactor = ContextCompactor(max_context_tokens=6_000, reserve_tokens=500, summarizer=summarizer)
    result = compactor.compact(_conversation())
    assert result.summary_source == "rule"
    assert result.fallback_reason is not None
    assert _core.looks_like_error("<think>only thinking</think>")
    assert not _core.looks_like_error("<think>x</think>The user asked to fix billing/tax.py.")
