"""When an early background summary is worth a summarizer call (issue 28): a conversation with one
large read between small steps starts no summary before the soft threshold (the bursty forecast),
an early summary that could not repay itself is not sent to the summarizer even before the
conversation has an LLM summary to measure by (the stand-in), the first cut of a large read
leaves room for the next one (the cut aimed at the jump target), and at the hard threshold a
summary that finishes within the short wait is applied as the LLM's, not replaced by a rule summary.

What the agent sees: the summarizer calls it pays for, which compactions apply the LLM summary,
and which tool output stays whole. No timings: the summarizer answers at once (``Gate(block=0)``)
and each test waits for a running summary before the next call; each test also runs the policy
before the change (its switch off) to show the call or cut it saves.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from context_compactor import ContextCompactor, validate_messages
from context_compactor import _session_background as policy
from context_compactor._background import Job
from context_compactor._session_background import BackgroundPolicy
from context_compactor.session import Session
from test_background import Gate, at_soft, grow_to
from test_session import tool_round

OMITTED = "chars omitted"


class Agent:
    """A background Session (3,000-token window: soft 2,160, hard 2,700, target 1,350) whose
    summarizer answers at once; :meth:`step` appends one tool round and runs ``prepare()``,
    waiting for a summary it started (so every run sees the same calls)."""

    def __init__(self, **kw: Any) -> None:
        self.gate = Gate(block=0)
        self.applied: list[Any] = []
        self.s = Session(
            compactor=ContextCompactor(
                max_context_tokens=3000,
                reserve_tokens=300,
                summarizer=self.gate,
                summarizer_timeout_s=20,
                background=True,
                on_compacted=self.applied.append,
                **kw,
            ),
            store=":memory:",
        )
        self.s.append({"role": "system", "content": "You are a coding agent."})
        self.s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
        self.k = 0

    def step(self, size: int) -> Any:
        round_ = tool_round(self.k, size=size)
        self.k += 1
        self.s.extend(round_)
        result = self.s.prepare()
        job = self.s.pending
        if job is not None:
            assert job.wait(5)
        assert self.s.check().current_tokens <= self.s.check().budget
        return result

    @property
    def tokens(self) -> int:
        return int(self.s.check().current_tokens)


def _one_read_then_small_steps(monkeypatch: pytest.MonkeyPatch, bursty: bool) -> Agent:
    monkeypatch.setattr(BackgroundPolicy, "bursty_forecast", bursty)
    a = Agent(protected_tools=("bash",))  # clearing output cannot help: only a summary does
    while a.tokens < 1450:  # past the target: from here the growth forecast may start a summary
        a.step(5)
    a.step(110)  # one read of ~430 tokens (under the soft-to-hard gap of 540: no jump)
    for _ in range(4):
        a.step(5)  # then small steps again; the conversation ends under the soft threshold
    assert a.s.check().urgency == "none" and not a.applied
    return a


def test_one_large_read_between_small_steps_starts_no_early_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    a = _one_read_then_small_steps(monkeypatch, bursty=True)
    assert a.gate.requests == []  # no summary paid for a compaction that never came
    # It still comes when due: at the soft threshold the summary starts and is applied as the LLM's.
    while a.s.check().urgency == "none":
        a.step(5)
    a.step(5)
    a.step(5)
    assert [r.summary_source for r in a.applied] == ["llm"]
    assert [r.chunk for r in a.gate.requests] == list(range(a.gate.requests[0].chunks))  # one summary
    assert validate_messages(a.s.context(), format="openai") == []
    a.s.close()


def test_before_the_bursty_forecast_the_same_read_started_a_wasted_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    a = _one_read_then_small_steps(monkeypatch, bursty=False)
    assert len(a.gate.requests) == 1  # the largest growth counted for every call: a call for nothing
    a.s.close()


def _read_at_the_start(monkeypatch: pytest.MonkeyPatch, stand_in: bool) -> Agent:
    monkeypatch.setattr(BackgroundPolicy, "stand_in", stand_in)
    a = Agent(protected_tools=("bash",))
    for _ in range(3):
        a.step(5)
    a.step(370)  # a read of ~1,240 tokens: a jump (over the 540-token gap), still under the soft threshold
    for _ in range(12):
        a.step(5)
    return a


def test_an_early_summary_that_could_not_repay_is_not_requested_before_any_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Right after the read, most of the context is the read itself, in the recent tail kept
    verbatim: a summary of the little before it would save less than ``min_savings_ratio``. The
    conversation has no LLM summary yet to measure a summary's length by; a stand-in as long as the
    smallest summary tells the same, and the summarizer is first called on a snapshot it repays."""
    a = _read_at_the_start(monkeypatch, stand_in=True)
    sources = [r.summary_source for r in a.applied]
    assert sources == ["llm"]
    assert len(a.gate.requests) == len(sources)  # every summary paid for was applied
    assert validate_messages(a.s.context(), format="openai") == []
    a.s.close()


def test_without_the_stand_in_the_first_early_summary_was_wasted(monkeypatch: pytest.MonkeyPatch) -> None:
    a = _read_at_the_start(monkeypatch, stand_in=False)
    assert [r.summary_source for r in a.applied] == ["llm"]
    assert len(a.gate.requests) == 2
    a.s.close()


def _two_reads(monkeypatch: pytest.MonkeyPatch, cut_low: bool) -> tuple[Agent, list[dict[str, Any]]]:
    monkeypatch.setattr(BackgroundPolicy, "cut_low", cut_low)
    a = Agent()
    for _ in range(3):
        a.step(5)
    first = a.step(1200)  # a first read of ~4,250 tokens, larger than the whole budget: cut
    assert first is not None and first.strategy == "truncation" and first.summary_source is None
    second = tool_round(a.k, size=470)  # the next call reads another file (~1,680 tokens)
    a.step(470)
    return a, second


def test_the_first_cut_of_a_read_leaves_room_for_the_next_read(monkeypatch: pytest.MonkeyPatch) -> None:
    a, second = _two_reads(monkeypatch, cut_low=True)
    ctx = a.s.context()
    assert ctx[-2:] == second  # the second read whole, as appended
    assert [r.strategy for r in a.applied] == ["truncation"]  # one cut: the first read's
    for _ in range(3):
        a.step(5)
    # The next compaction with a summary is the LLM's.
    assert [r.summary_source for r in a.applied if r.summary_source is not None][:1] == ["llm"]
    assert validate_messages(a.s.context(), format="openai") == []
    a.s.close()


def test_before_the_low_cut_the_next_read_was_cut_too(monkeypatch: pytest.MonkeyPatch) -> None:
    a, second = _two_reads(monkeypatch, cut_low=False)
    assert [r.strategy for r in a.applied] == ["truncation", "truncation"]
    assert OMITTED in a.s.context()[-1]["content"] and a.s.context()[-2] == second[0]
    a.s.close()


def _cross_hard_while_summarizing(monkeypatch: pytest.MonkeyPatch, wait: float, finishes: bool) -> tuple[Any, Any]:
    """A summary started at the soft threshold is running when a call crosses the hard threshold;
    it answers as soon as ``prepare()`` starts waiting for it (``finishes``) or never. The wait is
    ``wait`` seconds (no share of a call: no clock involved)."""
    monkeypatch.setattr(BackgroundPolicy, "hard_wait_s", wait)
    monkeypatch.setattr(policy, "HARD_WAIT_SHARE", 1e9)
    gate = Gate(block=1)
    applied: list[Any] = []
    s = at_soft(gate, on_compacted=applied.append)
    job = s.pending
    assert job is not None and gate.entered.wait(5)
    if finishes:
        wait_for = Job.wait

        def answered(self: Job, timeout: float | None = None) -> bool:
            gate.release.set()  # the summarizer answers while prepare() waits
            return wait_for(self, timeout)

        monkeypatch.setattr(Job, "wait", answered)
    s.extend(tool_round(80, size=200))
    assert s.check().urgency == "hard"
    s.prepare()
    assert s.check().current_tokens <= s.check().budget
    assert validate_messages(s.context(), format="openai") == []
    return s, applied


def test_a_summary_that_answers_within_the_wait_is_applied_at_the_hard_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s, applied = _cross_hard_while_summarizing(monkeypatch, wait=30.0, finishes=True)
    assert [(r.summary_source, r.strategy) for r in applied] == [("llm", "summary")]
    assert s.check().urgency != "hard"
    assert any("Checked the modules" in str(m.get("content")) for m in s.context())
    s.close()


def test_without_the_wait_the_same_crossing_gets_the_rule_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    s, applied = _cross_hard_while_summarizing(monkeypatch, wait=0.0, finishes=True)
    assert [r.summary_source for r in applied] == ["rule"]
    s.close()


def test_the_wait_is_bounded_a_summary_still_running_gets_the_rule_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    s, applied = _cross_hard_while_summarizing(monkeypatch, wait=0.01, finishes=False)
    assert [r.summary_source for r in applied] == ["rule"]  # prepare() returned: the agent goes on
    job = s.pending
    assert job is not None and not job.done() and job.upgrade is not None  # its LLM summary re-applies later
    s.close()


def test_aprepare_waits_for_the_running_summary_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BackgroundPolicy, "hard_wait_s", 30.0)
    monkeypatch.setattr(policy, "HARD_WAIT_SHARE", 1e9)
    gate = Gate(block=1)
    applied: list[Any] = []
    await_done = Job.await_done

    async def answered(self: Job, timeout: float | None = None) -> bool:
        gate.release.set()  # the summarizer answers while aprepare() waits
        return await await_done(self, timeout)

    monkeypatch.setattr(Job, "await_done", answered)

    async def main() -> None:
        s = Session(
            compactor=ContextCompactor(
                max_context_tokens=3000,
                reserve_tokens=300,
                summarizer=gate,
                summarizer_timeout_s=20,
                background=True,
                on_compacted=applied.append,
            ),
            store=":memory:",
        )
        s.append({"role": "system", "content": "You are a coding agent."})
        s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
        grow_to(s, "soft")
        assert await s.aprepare() is None and s.pending is not None
        s.extend(tool_round(80, size=200))
        assert s.check().urgency == "hard"
        await s.aprepare()
        assert [r.summary_source for r in applied] == ["llm"]
        assert validate_messages(s.context(), format="openai") == []
        s.close()

    asyncio.run(main())
