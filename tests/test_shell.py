"""compact()/acompact(): the summarizer contract, failures, timeouts, hooks, cool-down."""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from typing import Any

import pytest

from _messages import conversation
from context_compactor import (
    SUMMARY_MARKER,
    CompactResult,
    ContextCompactor,
    ConversationState,
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    validate_messages,
)


def compactor(**kw: Any) -> ContextCompactor:
    return ContextCompactor(max_context_tokens=12_000, reserve_tokens=1_000, clear_at_least_tokens=0, **kw)


def good(req: SummaryRequest) -> str:
    assert req.messages[0]["role"] == "system" and req.messages[1]["role"] == "user"
    # The summary growth bound: a tenth of the target (11,000-token budget, target 5,500).
    assert req.max_tokens == compactor().config.summary_token_limit == 550
    return "<summary>The user asked to fix a failing test; the agent ran many bash commands.</summary>"


def test_sync_summarizer_used_and_input_untouched() -> None:
    msgs = conversation()
    before = copy.deepcopy(msgs)
    r = compactor(summarizer=good).compact(msgs)
    assert r.strategy == "summary"
    assert r.fallback_reason is None
    assert "failing test" in (r.summary or "")
    assert "f5.py" in (r.summary or ""), "must-keep facts of the replaced span are carried"
    assert msgs == before
    assert validate_messages(r.messages) == []
    assert r.tokens_after <= compactor().config.soft_threshold


def test_no_summarizer_uses_rule_summary() -> None:
    r = compactor().compact(conversation())
    assert r.strategy == "rule_summary"


def test_below_threshold_nothing_happens() -> None:
    msgs = conversation(2)
    r = compactor(summarizer=good).compact(msgs)
    assert r.strategy == "none" and r.reason
    assert all(a is b for a, b in zip(r.messages, msgs, strict=True))


class RateLimitError(Exception):
    status_code = 429


class AuthenticationError(Exception):
    status_code = 401


class Boom(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


@pytest.mark.parametrize(
    "exc",
    [RateLimitError("slow down"), TimeoutError("timed out"), ConnectionError("reset"), Boom(503), Boom(529)],
)
def test_transient_errors_fall_back(exc: Exception, caplog: pytest.LogCaptureFixture) -> None:
    def failing(req: SummaryRequest) -> str:
        raise exc

    state = ConversationState()
    with caplog.at_level(logging.WARNING, logger="context_compactor"):
        r = compactor(summarizer=failing).compact(conversation(), state=state)
    assert r.strategy == "rule_summary"
    assert r.fallback_reason and type(exc).__name__ in r.fallback_reason
    assert any("summarizer failed" in rec.message for rec in caplog.records)
    assert state.cooldown_remaining == 3


@pytest.mark.parametrize("exc", [AuthenticationError("bad key"), Boom(400), Boom(404), Boom(403)])
def test_permanent_errors_raise(exc: Exception) -> None:
    def failing(req: SummaryRequest) -> str:
        raise exc

    with pytest.raises(SummarizerError) as e:
        compactor(summarizer=failing).compact(conversation())
    assert e.value.__cause__ is exc
    r = compactor(summarizer=failing, on_summarizer_error="fallback_all").compact(conversation())
    assert r.strategy == "rule_summary" and r.fallback_reason


def test_raise_policy_raises_even_transient() -> None:
    def failing(req: SummaryRequest) -> str:
        raise TimeoutError("slow")

    with pytest.raises(SummarizerError):
        compactor(summarizer=failing, on_summarizer_error="raise").compact(conversation())


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "I'm sorry, but I can't help with that.",
        "抱歉，我无法完成这个请求。",
        "Error: 500 internal server error",
        "Traceback (most recent call last):\n  File 'x.py'",
        42,
        None,
    ],
)
def test_unusable_replies_fall_back(reply: Any) -> None:
    r = compactor(summarizer=lambda req: reply).compact(conversation())
    assert r.strategy == "rule_summary", r.summary
    assert r.fallback_reason
    if isinstance(reply, str) and reply.strip():
        assert reply not in (r.summary or ""), "error text is never committed as a summary"


def test_overlong_reply_is_capped() -> None:
    long = "<summary>" + "This sentence is part of a very long summary. " * 3000 + "</summary>"
    r = compactor(summarizer=lambda req: long, summary_max_tokens=300).compact(conversation())
    assert r.strategy == "summary"
    assert r.summary_truncated
    assert r.tokens_after <= compactor().config.soft_threshold


def test_summary_response_object() -> None:
    r = compactor(summarizer=lambda req: SummaryResponse("<summary>ok.</summary>", truncated=True)).compact(
        conversation()
    )
    assert r.strategy == "summary" and r.summary_truncated


def test_timeout_finishes_promptly() -> None:
    def slow(req: SummaryRequest) -> str:
        time.sleep(30)
        return "<summary>late</summary>"

    t = time.monotonic()
    r = compactor(summarizer=slow, summarizer_timeout_s=0.3).compact(conversation())
    assert time.monotonic() - t < 5
    assert r.strategy == "rule_summary"
    assert r.fallback_reason and "Timeout" in r.fallback_reason


def test_async_summarizer_under_compact_is_an_error() -> None:
    async def asummarize(req: SummaryRequest) -> str:
        return "<summary>x</summary>"

    with pytest.raises(SummarizerError, match="acompact"):
        compactor(summarizer=asummarize).compact(conversation())


def test_acompact_with_async_and_sync_summarizers() -> None:
    async def asummarize(req: SummaryRequest) -> str:
        await asyncio.sleep(0)
        return "<summary>async summary.</summary>"

    r = asyncio.run(compactor(summarizer=asummarize).acompact(conversation()))
    assert r.strategy == "summary" and "async summary" in (r.summary or "")
    r = asyncio.run(compactor(summarizer=good).acompact(conversation()))
    assert r.strategy == "summary"


def test_sync_summarizer_under_acompact_does_not_block_the_loop() -> None:
    def blocking(req: SummaryRequest) -> str:
        time.sleep(0.5)
        return "<summary>done.</summary>"

    async def main() -> tuple[CompactResult, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        r = await compactor(summarizer=blocking).acompact(conversation())
        task.cancel()
        return r, ticks

    r, ticks = asyncio.run(main())
    assert r.strategy == "summary"
    assert ticks >= 20, "the event loop kept running while the summarizer worked"


def test_acompact_timeout_and_cancellation() -> None:
    async def slow(req: SummaryRequest) -> str:
        await asyncio.sleep(30)
        return "x"

    r = asyncio.run(compactor(summarizer=slow, summarizer_timeout_s=0.2).acompact(conversation()))
    assert r.strategy == "rule_summary" and r.fallback_reason

    msgs = conversation()
    before = copy.deepcopy(msgs)

    async def main() -> None:
        task = asyncio.create_task(compactor(summarizer=slow).acompact(msgs))
        await asyncio.sleep(0.1)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert msgs == before


def test_hooks_veto_replace_and_count() -> None:
    seen: list[Any] = []

    def veto(preview: Any) -> None:
        seen.append(preview)
        preview.veto("not now")

    msgs = conversation()
    r = compactor(summarizer=good, on_before_compact=veto).compact(msgs)
    assert r.strategy == "none" and r.reason == "not now"
    assert r.messages == msgs
    assert seen[0].request is not None and seen[0].tokens_before > 0

    called: list[Any] = []

    def replace(preview: Any) -> None:
        preview.use_summary("<summary>from the hook.</summary>")
        preview.flushed(3)

    r = compactor(summarizer=lambda req: called.append(req) or "x", on_before_compact=replace).compact(msgs)
    assert not called, "the summarizer is not called when the hook supplies the summary"
    assert "from the hook" in (r.summary or "")
    assert r.flushed_memories == 3

    after: list[CompactResult] = []
    r = compactor(on_compacted=after.append).compact(msgs)
    assert after == [r]

    async def async_hook(preview: Any) -> None:
        await asyncio.sleep(0)
        preview.flushed(1)

    r = asyncio.run(compactor(on_before_compact=async_hook).acompact(msgs))
    assert r.flushed_memories == 1
    with pytest.raises(SummarizerError, match="acompact"):
        compactor(on_before_compact=async_hook).compact(msgs)


def test_hook_exceptions_propagate() -> None:
    def bad(preview: Any) -> None:
        raise KeyError("hook bug")

    with pytest.raises(KeyError):
        compactor(on_before_compact=bad).compact(conversation())


def test_cooldown_skips_the_llm_not_the_summary() -> None:
    def failing(req: SummaryRequest) -> str:
        raise TimeoutError("slow")

    state = ConversationState()
    c = compactor(summarizer=failing, cooldown_calls=2)
    r = c.compact(conversation(), state=state)
    assert r.strategy == "rule_summary" and state.cooldown_remaining == 2
    calls: list[SummaryRequest] = []
    c2 = compactor(summarizer=lambda req: calls.append(req) or "<summary>ok</summary>", cooldown_calls=2)
    r = c2.compact(conversation(60), state=state)
    assert not calls and r.strategy == "rule_summary" and r.summary_source == "rule"
    assert not r.over_budget and r.tokens_after <= c2.config.soft_threshold
    assert state.cooldown_remaining == 1
    c2.compact(conversation(60), state=state)
    assert state.cooldown_remaining == 0
    r = c2.compact(conversation(60), state=state)
    assert calls and r.strategy == "summary"


def test_a_pinned_earlier_summary_is_kept_as_it_is() -> None:
    # DESIGN, invariant 2: pinned messages are never changed, an earlier summary included. An
    # unpinned one is folded into the new summary (incremental summaries).
    first = compactor(summarizer=good).compact(conversation(), force=True)
    old = next(m for m in first.messages if str(m.get("content", "")).startswith(SUMMARY_MARKER))
    later = [*first.messages, *conversation(30)[2:]]
    at = later.index(old)

    def run(**kw: Any) -> tuple[CompactResult, list[SummaryRequest]]:
        seen: list[SummaryRequest] = []
        r = compactor(summarizer=lambda req: seen.append(req) or "<summary>Later work.</summary>").compact(
            later, force=True, **kw
        )
        return r, seen

    pinned, seen = run(pinned=[at])
    assert any(m is old for m in pinned.messages), "the pinned summary comes back as the same object"
    assert pinned.summary is not None and not validate_messages(pinned.messages)
    assert not any("fix a failing test" in (req.previous_summary or "") for req in seen)
    unpinned, seen = run()
    assert not any(m is old for m in unpinned.messages)
    assert "fix a failing test" in (seen[0].previous_summary or "")


def test_force_is_the_compact_command() -> None:
    msgs = conversation(6)
    assert compactor().compact(msgs).summary is None
    r = compactor(summarizer=good).compact(msgs, force=True)
    assert r.strategy == "summary"
    tiny = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    r = compactor().compact(tiny, force=True)
    assert r.strategy == "none", "nothing outside the kept head and tail"
    assert r.messages == tiny


def test_instructions_reach_the_request() -> None:
    reqs: list[SummaryRequest] = []
    compactor(summarizer=lambda req: reqs.append(req) or "<summary>x</summary>").compact(
        conversation(), force=True, instructions="Focus on the billing module."
    )
    assert reqs[0].instructions == "Focus on the billing module."
    assert "billing module" in reqs[0].user_prompt


def test_pinned_messages_are_kept() -> None:
    msgs = conversation()
    r = compactor().compact(msgs, pinned=[5])
    assert any(m is msgs[5] for m in r.messages)
    assert any(m is msgs[4] for m in r.messages), "pinning a result keeps its whole tool block"
    r = compactor().compact(msgs, pinned=lambda i, m: m.get("tool_call_id") == "call_3")
    assert any(m.get("tool_call_id") == "call_3" for m in r.messages)


def test_reprs_are_short_and_name_the_figures_not_the_messages() -> None:
    msgs = conversation(150)
    seen: list[Any] = []

    def hook(preview: Any) -> None:
        seen.append(preview)

    r = compactor(summarizer=good, on_before_compact=hook).compact(msgs)
    text = repr(r)
    assert len(text) < 400, text
    assert text.startswith("CompactResult(strategy='summary', messages=") and f"(of {len(msgs)})" in text
    assert f"tokens={r.tokens_before:,} -> {r.tokens_after:,}" in text and "over_budget=False" in text
    assert "rounding rules" not in text and "line 1" not in text  # no message text
    # The summary request and the hook's preview hold the transcript and the messages: sizes only.
    request = compactor().plan(msgs, force=True).request
    assert request is not None
    assert len(repr(request)) < 300 and "user_prompt=<" in repr(request) and "rounding" not in repr(request)
    assert len(seen) == 1 and len(repr(seen[0])) < 500 and "rounding" not in repr(seen[0])
