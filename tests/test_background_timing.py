"""When the background summary starts (issue 28): with ``background=True`` and a summarizer that
takes several model calls to answer, the growth forecast starts the summary early enough that the
LLM summary (not the rule summary) is applied, ``prepare()`` never waits for it, and the
summarizer is called about once per compaction.

No timings are asserted: the summarizer is held until the test releases it after a given number of
agent calls, and the clock the forecast reads is a fake one the test advances by one
"model call" per turn, so every run sees the same calls and the same counts.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from context_compactor import ContextCompactor, SummaryRequest, _background
from context_compactor._background import Job
from context_compactor.session import Session
from test_session import tool_round

SUMMARY = "<summary>Checked the modules under /srv/app for the KeyError.</summary>"


class Slow:
    """A summarizer that answers only when the test releases it (each call on its own)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: list[threading.Event] = []
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        released = threading.Event()
        with self.lock:
            self.requests.append(request)
            self.waiting.append(released)
        assert released.wait(10), "the test never released the summarizer"
        return SUMMARY

    def release(self) -> None:
        """Answer every call waiting now (none in advance: a later call waits for its own)."""
        with self.lock:
            waiting, self.waiting = self.waiting, []
        for event in waiting:
            event.set()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def answer(slow: Slow, job: Job) -> None:
    """Let the summarizer answer ``job`` (and a cancelled job's call still waiting)."""
    for _ in range(400):
        slow.release()
        if job.wait(0.025):
            return
    raise AssertionError("the background summary never finished")


def replay(
    monkeypatch: pytest.MonkeyPatch, latency_calls: int, turns: int, size: int, sizes: list[int] | None = None
) -> tuple[list[Any], Slow, int, Session]:
    """An agent loop of ``turns`` model calls (one second each on the fake clock), each adding a tool
    round of ``size`` lines (or ``sizes[k]``); the summarizer answers ``latency_calls`` calls after it
    was started. Returns the compactions applied, the summarizer, how often prepare() returned while
    a summary was being written, and the Session (open)."""
    clock = Clock()
    monkeypatch.setattr(_background, "clock", clock)
    slow = Slow()
    applied: list[Any] = []
    compactor = ContextCompactor(
        max_context_tokens=3000,
        reserve_tokens=300,
        summarizer=slow,
        summarizer_timeout_s=20,
        protected_tools=("bash",),  # clearing tool output cannot help: only a summary does
        on_compacted=applied.append,
        background=True,
    )
    s = Session(compactor=compactor, store=":memory:")
    s.append({"role": "system", "content": "You are a coding agent."})
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    age: dict[Job, int] = {}  # the jobs seen (kept alive: no id is reused) and the calls they ran
    while_running = 0
    for k in range(turns):
        s.extend(tool_round(k, size=size if sizes is None else sizes[k]))
        s.prepare()
        job = s.pending
        if job is not None and not job.done():
            while_running += 1  # prepare() returned while the summary was being written
            age[job] = age.get(job, 0) + 1
            if age[job] >= latency_calls:
                answer(slow, job)
        clock.now += 1.0  # the model call
    return applied, slow, while_running, s


def _session(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> tuple[Session, Slow]:
    """A background Session on ``clock`` (3,000-token window, ``bash`` output protected) whose
    summarizer answers only when the test releases it, with the user's task as its first message."""
    monkeypatch.setattr(_background, "clock", clock)
    slow = Slow()
    s = Session(
        compactor=ContextCompactor(
            max_context_tokens=3000,
            reserve_tokens=300,
            summarizer=slow,
            summarizer_timeout_s=20,
            protected_tools=("bash",),
            background=True,
        ),
        store=":memory:",
    )
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    return s, slow


def summarizing(applied: list[Any]) -> list[Any]:
    """The compactions that replaced a span with a summary (a re-apply upgrades the one before)."""
    return [r for r in applied if r.summary_source is not None and ("reapply", r.tokens_after) not in r.phases]


def test_a_slow_summarizer_is_applied_as_llm_without_blocking_and_called_once_per_compaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    applied, slow, while_running, s = replay(monkeypatch, latency_calls=4, turns=80, size=40)
    made = summarizing(applied)
    assert len(made) >= 5, "the replay should compact several times"
    assert while_running >= 3 * len(made), "prepare() should return while the summary is being written"
    llm = [r for r in made if r.summary_source == "llm"]
    # The first summary's latency is not known yet; every later one starts early enough.
    assert len(llm) >= len(made) - 1
    assert all(r.summary_source == "llm" for r in made[1:])
    assert len(slow.requests) <= 1.1 * len(made) + 1  # + the summary running when the replay ends
    assert all(s.check().current_tokens <= s.check().budget for _ in [0])
    s.close()


def test_after_a_jump_the_summary_is_ready_for_the_next_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation whose tool outputs are now and then larger than the whole soft-to-hard gap
    (here ~1,000 tokens every eighth call; the gap is 540): such a call goes from under the soft
    threshold to over the hard one at once, before a summary started at the soft threshold (or by
    the growth of the last calls) can be ready. After the first one, the next are met by an LLM
    summary made in time (aimed low enough for such a call to fit after it), not by the rule
    summary, with about one summarizer call per compaction and never over the budget."""
    sizes = [300 if k % 8 == 7 else 10 for k in range(64)]
    applied, slow, _, s = replay(monkeypatch, latency_calls=2, turns=len(sizes), size=10, sizes=sizes)
    cfg = s.compactor.config
    assert cfg.hard_threshold - cfg.soft_threshold < 1000  # each big output is a jump
    made = summarizing(applied)
    rules = [r for r in made if r.summary_source == "rule"]
    assert len(made) >= 6, "the replay should compact several times"
    # The first jump comes unannounced: the rule summary keeps the request inside the window then.
    assert len(rules) <= 1, " ".join(f"{r.summary_source}:{r.tokens_before}>{r.tokens_after}" for r in made)
    assert len(slow.requests) <= 1.1 * len(made) + 1  # + the summary running when the replay ends
    assert all(r.tokens_after <= cfg.budget for r in applied)
    assert s.check().current_tokens <= cfg.budget
    s.close()


def test_an_early_summary_sets_no_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary the forecast started below the soft threshold is planned as if that threshold were
    where the context was; ending above that point is no compaction loop, so it leaves no hold
    (``retry_growth_tokens``) that would keep the next early summary from compacting anything."""
    clock = Clock()
    s, slow = _session(monkeypatch, clock)
    soft = s.compactor.config.soft_threshold
    early: list[tuple[int, int | None]] = []
    age: dict[Job, int] = {}
    for k in range(64):
        s.extend(tool_round(k, size=300 if k % 8 == 7 else 10))
        before = s.check().current_tokens
        r = s.prepare()
        if r is not None and r.summary_source == "llm" and before < soft:
            early.append((r.tokens_after, s.state.hold_until))
        job = s.pending
        if job is not None and not job.done():
            age[job] = age.get(job, 0) + 1
            if age[job] >= 2:
                answer(slow, job)
        clock.now += 1.0
    s.close()
    assert len(early) >= 3, "the forecast should apply several summaries below the soft threshold"
    assert all(hold is None for _, hold in early), early


def test_the_measured_latency_moves_the_start_earlier(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summarizer twice as slow (in model calls) starts its summary further from the hard
    threshold, and is still applied as the LLM summary."""
    starts: dict[int, list[int]] = {}
    for latency in (2, 5):
        clock = Clock()
        s, slow = _session(monkeypatch, clock)
        age: dict[Job, int] = {}
        results = []
        for k in range(45):
            s.extend(tool_round(k, size=40))
            r = s.prepare()
            if r is not None:
                results.append(r)
            job = s.pending
            if job is not None and job not in age:
                age[job] = 0
                if job.upgrade is None:  # started by the forecast or at the soft threshold
                    starts.setdefault(latency, []).append(s.check().hard_threshold - s.check().current_tokens)
            if job is not None and not job.done():
                age[job] += 1
                if age[job] >= latency:
                    answer(slow, job)
            clock.now += 1.0
        sources = [r.summary_source for r in summarizing(results)]
        assert sources[1:] == ["llm"] * (len(sources) - 1), " ".join(
            f"{r.summary_source}:{r.tokens_before}>{r.tokens_after}" for r in results
        )
        s.close()
    # Room left under the hard threshold when a summary started, after the first (measured) one.
    assert min(starts[5][1:]) > max(starts[2][1:])
