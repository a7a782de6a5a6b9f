"""Background compaction (``background=True``): prepare() never waits for the summarizer; the summary
made on a snapshot is applied later with the delta verbatim; failures, cancellation, close, SIGKILL,
asyncio, and the on_before_compact preview (candidates, force). Over 600 lines: one short test each;
the properties are tests/test_background_properties.py."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from context_compactor import (
    CompactionPreview,
    ContextCompactor,
    StoreError,
    SummarizerError,
    SummaryRequest,
    validate_messages,
)
from context_compactor._session_background import BackgroundPolicy
from context_compactor.session import Session
from test_session import integrity, tool_round

SUMMARY = "<summary>Checked the modules under /srv/app for the KeyError.</summary>"


class Gate:
    """A summarizer that waits until released (or a timeout), recording its requests."""

    def __init__(self, reply: str = SUMMARY, error: BaseException | None = None, block: int = 1) -> None:
        self.reply, self.error, self.block = reply, error, block
        self.release = threading.Event()
        self.entered = threading.Event()
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        self.entered.set()
        if len(self.requests) <= self.block:
            assert self.release.wait(10), "the test never released the summarizer"
        if self.error is not None:
            raise self.error
        return self.reply


def compactor(summarizer: Any, **kw: Any) -> ContextCompactor:
    kw.setdefault("max_context_tokens", 3000)
    kw.setdefault("reserve_tokens", 300)
    kw.setdefault("summarizer_timeout_s", 20)
    return ContextCompactor(summarizer=summarizer, background=True, **kw)


def start(s: Session) -> None:
    s.append({"role": "system", "content": "You are a coding agent."})
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})


def grow_to(s: Session, level: str, i: int = 0) -> int:
    """Append tool rounds until the check reaches ``level`` ("soft" or "hard")."""
    while True:
        u = s.check().urgency
        if u == level or (level == "soft" and u == "hard"):
            return i
        s.extend(
            [
                {"role": "assistant", "content": f"Step {i}: read /srv/app/mod{i}.py. " + "Looked at it. " * 12},
                {"role": "user", "content": f"Go on with step {i + 1}."},
            ]
        )
        i += 1


def at_soft(gate: Gate, **kw: Any) -> Session:
    """A Session (in memory) grown to the soft threshold, whose ``prepare()`` started the
    background summary there (it returned ``None``: nothing applied yet)."""
    s = Session(compactor=compactor(gate, **kw), store=":memory:")
    start(s)
    grow_to(s, "soft")
    assert s.prepare() is None
    return s


def test_prepare_returns_at_once_and_applies_the_summary_with_the_delta(tmp_path: Path) -> None:
    gate = Gate()
    s = Session("s", compactor=compactor(gate), store=tmp_path / "b.db")
    start(s)
    i = grow_to(s, "soft")
    assert s.check().urgency == "soft"
    # The summarizer is blocked: prepare() returns without waiting for it.
    assert s.prepare() is None
    assert gate.entered.wait(5) and s.pending is not None and not s.pending.done()
    snapshot_seq = len(s)
    delta = tool_round(i, size=5)
    s.extend(delta)  # the agent keeps going meanwhile
    gate.release.set()
    assert s.pending.wait(5)
    result = s.prepare()
    assert result is not None and result.summary_source == "llm" and result.strategy == "summary"
    ctx = s.context()
    assert ctx[-2:] == delta, "the delta follows the summary verbatim"
    assert any("Checked the modules" in str(m.get("content")) for m in ctx)
    record = s.compactions()[-1]
    assert record.upto_seq == snapshot_seq
    assert validate_messages(ctx, format="openai") == []
    assert s.pending is None
    again = Session(
        "s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=tmp_path / "b.db"
    )
    assert again.context() == ctx and again.context_ids() == s.context_ids()
    again.close()
    s.close()
    integrity(tmp_path / "b.db")


def test_at_the_hard_threshold_the_rule_summary_applies_and_the_late_summary_replaces_it(tmp_path: Path) -> None:
    """The running job's own plan gets the rule summary now; its LLM summary replaces that rule
    summary when it arrives (same span, the delta still verbatim after it)."""
    gate = Gate(reply="<summary>LATE LLM SUMMARY of /srv/app/mod0.py work.</summary>", block=1)
    path = tmp_path / "h.db"
    s = Session("s", compactor=compactor(gate), store=path)
    start(s)
    i = grow_to(s, "soft")
    assert s.prepare() is None and gate.entered.wait(5)
    job = s.pending
    i = grow_to(s, "hard", i)
    result = s.prepare()  # the job still runs: not awaited
    assert result is not None and result.summary_source == "rule"
    assert s.check().urgency == "none"
    assert s.pending is job and job is not None and job.upgrade is not None
    ruled = s.compactions()[-1]
    assert ruled.upto_seq == job.snap.upto_seq  # the job's snapshot, with the delta after it
    delta = tool_round(i, size=5)
    s.extend(delta)
    gate.release.set()
    assert job.wait(5)
    late = s.prepare()
    assert late is not None and late.summary_source == "llm" and ("reapply", late.tokens_after) in late.phases
    ctx = s.context()
    assert ctx[-2:] == delta and validate_messages(ctx, format="openai") == []
    assert any("LATE LLM SUMMARY" in str(m.get("content")) for m in ctx)
    # What the job's summary applied directly with the delta would have given (same snapshot + delta
    # + summary => same context).
    assert ctx == list(late.messages) + s.history()[ruled.upto_seq :]
    assert not any("LATE LLM SUMMARY" not in str(m.get("content")) and m.get("content") == ruled.summary for m in ctx)
    records = s.compactions()
    assert len(records) == 2 and records[-1].upto_seq == ruled.upto_seq
    # It replaced the rule summary's row (expand resolves it to the originals that compaction took).
    rule_rows = set(records[0].replaced)
    assert records[-1].record and all(e.action == "summarized" for e in records[-1].record)
    assert {json.dumps(m, sort_keys=True) for m in s.expand(records[-1].id)} == {
        json.dumps(m, sort_keys=True) for m in s.expand(records[0].id)
    }
    assert rule_rows
    again = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=path)
    assert again.context() == ctx and again.context_ids() == s.context_ids()
    again.close()
    s.close()
    integrity(path)


def test_a_late_summary_that_no_longer_fits_is_carried_to_the_next_compaction() -> None:
    """When the LLM summary cannot replace the rule summary (the messages appended since keep the
    context at the hard threshold), the next compaction's summary builds on it instead."""
    long = "<summary>LATE LLM SUMMARY. " + "Went through /srv/app/mod0.py line by line. " * 40 + "</summary>"
    gate = Gate(reply=long, block=1)
    s = Session(compactor=compactor(gate), store=":memory:")
    start(s)
    i = grow_to(s, "soft")
    assert s.prepare() is None and gate.entered.wait(5)
    i = grow_to(s, "hard", i)
    result = s.prepare()
    assert result is not None and result.summary_source == "rule"
    job = s.pending
    assert job is not None and job.upgrade is not None
    i = grow_to(s, "hard", i)  # at the hard threshold again before the summary arrives
    gate.release.set()
    assert job.wait(5)
    gate.reply = SUMMARY
    result = s.prepare()  # the late summary does not fit: the rule summary now, over it
    assert result is not None and result.summary_source == "rule"
    assert len(s.compactions()) == 2
    upgrade = s.pending
    assert upgrade is not None and upgrade is not job and upgrade.wait(5)
    result = s.prepare()
    assert result is not None and result.summary_source == "llm"
    assert "LATE LLM SUMMARY" in (gate.requests[-1].previous_summary or "")
    assert "LATE LLM SUMMARY" in gate.requests[-1].user_prompt
    assert validate_messages(s.context(), format="openai") == []
    s.close()


def test_a_tool_output_that_jumps_past_the_hard_threshold_gets_the_llm_summary_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No job was running (the context jumped from under the soft threshold past the hard one) and
    the jump is not cut (the cut is off here; tests/test_background_cut.py has it): the rule summary
    applies now, the LLM summary of the same snapshot is made in the background and replaces it."""
    monkeypatch.setattr(BackgroundPolicy, "cut_jumps", False)
    gate = Gate(block=1)
    path = tmp_path / "j.db"
    s = Session("s", compactor=compactor(gate), store=path)
    start(s)
    for k in range(6):
        s.extend(tool_round(k, size=30))
    assert s.prepare() is None and s.check().urgency == "none" and s.pending is None
    s.extend(tool_round(50, size=800))  # one big tool output: past the hard threshold at once
    assert s.check().urgency == "hard"
    result = s.prepare()
    assert result is not None and result.summary_source == "rule" and s.check().urgency != "hard"
    job = s.pending
    assert job is not None and job.upgrade is not None and gate.entered.wait(5)
    s.extend(tool_round(51, size=3))
    gate.release.set()
    assert job.wait(5)
    late = s.prepare()
    assert late is not None and late.summary_source == "llm"
    ctx = s.context()
    assert validate_messages(ctx, format="openai") == [] and ctx[-2:] == tool_round(51, size=3)
    assert any("Checked the modules" in str(m.get("content")) for m in ctx)
    again = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=path)
    assert again.context() == ctx
    again.close()
    s.close()
    integrity(path)


def test_a_background_failure_falls_back_and_starts_the_cooldown() -> None:
    gate = Gate(error=TimeoutError("the model timed out"))
    gate.release.set()
    s = Session(compactor=compactor(gate, cooldown_calls=2), store=":memory:")
    start(s)
    grow_to(s, "soft")
    assert s.prepare() is None
    assert s.pending is not None and s.pending.wait(5)
    result = s.prepare()
    assert result is not None and result.summary_source == "rule"
    assert result.fallback_reason is not None and "timed out" in result.fallback_reason
    assert s.state.cooldown_remaining == 2
    assert validate_messages(s.context(), format="openai") == []
    s.close()


def test_a_permanent_background_failure_is_raised_by_the_next_prepare() -> None:
    class AuthenticationError(Exception):
        status_code = 401

    gate = Gate(error=AuthenticationError("bad key"))
    gate.release.set()
    s = at_soft(gate)
    assert s.pending is not None and s.pending.wait(5)
    with pytest.raises(SummarizerError, match="bad key"):
        s.prepare()
    s.close()


def test_force_cancels_a_running_job() -> None:
    gate = Gate(block=1)
    s = at_soft(gate)
    assert gate.entered.wait(5)
    job = s.pending
    result = s.prepare(force=True)  # the second call is not blocked: the foreground summary
    assert result is not None and result.summary_source == "llm"
    assert job is not None and job.cancelled and s.pending is None
    gate.release.set()
    assert job.wait(5)
    assert len(s.compactions()) == 1  # the cancelled job's summary is never applied
    s.close()


def test_a_summary_that_hangs_does_not_hold_back_the_next_sessions_jobs() -> None:
    """Jobs run in worker threads kept for the next job; one whose summarizer call hangs keeps its
    worker, and another Session's summary runs in another one meanwhile."""
    hung = Gate(block=1)
    a = at_soft(hung)
    assert hung.entered.wait(5) and a.pending is not None
    for _ in range(3):  # one after the other: each in an idle worker or a new one
        quick = Gate(block=0)
        b = at_soft(quick)
        job = b.pending
        assert job is not None and job.wait(5)
        assert b.prepare() is not None and b.pending is None
        assert len(quick.requests) == 1
        b.close()
    assert not a.pending.done()
    hung.release.set()
    assert a.pending.wait(5)
    assert a.prepare() is not None
    a.close()


def test_close_during_a_background_summary_writes_nothing_after(tmp_path: Path) -> None:
    gate = Gate()
    path = tmp_path / "c.db"
    s = Session("s", compactor=compactor(gate), store=path)
    start(s)
    grow_to(s, "soft")
    assert s.prepare() is None and gate.entered.wait(5)
    job = s.pending
    s.close()
    assert job is not None and job.cancelled and job.done()
    gate.release.set()
    time.sleep(0.05)
    with pytest.raises(StoreError, match="closed"):
        s.prepare()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM compactions").fetchone()[0] == 0
    conn.close()
    integrity(path)


def test_on_before_compact_sees_candidates_and_can_veto_or_force() -> None:
    seen: list[CompactionPreview] = []
    action = {"do": "veto"}

    def hook(preview: CompactionPreview) -> None:
        seen.append(preview)
        assert preview.background
        assert preview.candidates and max(preview.candidates) < len(preview.messages)
        if action["do"] == "veto":
            preview.veto("not now")
        else:
            preview.force()

    gate = Gate(block=0)
    c = ContextCompactor(
        max_context_tokens=3000, reserve_tokens=300, summarizer=gate, background=True, on_before_compact=hook
    )
    s = Session(compactor=c, store=":memory:")
    start(s)
    grow_to(s, "soft")
    assert s.prepare() is None and s.pending is None and not gate.requests  # vetoed: no job started
    action["do"] = "force"
    result = s.prepare()  # forced: the summary is made in this call
    assert result is not None and result.summary_source == "llm" and s.pending is None
    assert len(seen) == 2
    s.close()


def test_asyncio_background_task_and_close() -> None:
    release = asyncio.Event()
    cancelled: list[bool] = []

    entered = asyncio.Event()

    async def summarize(request: SummaryRequest) -> str:
        entered.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return SUMMARY

    async def main() -> None:
        s = Session(compactor=compactor(summarize), store=":memory:")
        start(s)
        i = grow_to(s, "soft")
        assert await s.aprepare() is None
        await asyncio.sleep(0.01)
        assert s.pending is not None and not s.pending.done()
        delta = tool_round(i, size=5)
        s.extend(delta)
        release.set()
        assert await s.pending.await_done(5)
        result = await s.aprepare()
        assert result is not None and result.summary_source == "llm"
        assert s.context()[-2:] == delta
        # A second job, cancelled by close().
        release.clear()
        entered.clear()
        grow_to(s, "soft", i + 1)
        assert await s.aprepare() is None
        await asyncio.wait_for(entered.wait(), 5)  # the summarizer is running
        job = s.pending
        s.close()
        await asyncio.sleep(0.01)
        assert job is not None and job.cancelled and job.done() and cancelled == [True]

    asyncio.run(main())


def test_a_bare_compactor_applies_a_snapshot_summary_with_the_delta() -> None:
    """The documented recipe without a Session: plan on a snapshot, summary later, delta verbatim."""
    c = ContextCompactor(max_context_tokens=3000, reserve_tokens=300)
    messages: list[Any] = [{"role": "user", "content": "Fix the KeyError in /srv/app please."}]
    i = 0
    while not c.check(messages).should_compact:
        messages += [
            {"role": "assistant", "content": f"Step {i}: read /srv/app/mod{i}.py. " + "Looked at it. " * 12},
            {"role": "user", "content": f"Go on with step {i + 1}."},
        ]
        i += 1
    snapshot = list(messages)
    plan = c.plan(snapshot)
    assert plan.request is not None
    messages += tool_round(i, size=5)  # appended while the summary runs
    result = plan.apply(SUMMARY)
    sent = result.messages + messages[len(snapshot) :]
    assert validate_messages(sent, format="openai") == []
    assert sent[-2:] == messages[-2:]


CHILD = textwrap.dedent(
    """
    import sys, time

    def say(*parts):
        sys.stdout.write(" ".join(map(str, parts)) + "\\n")
        sys.stdout.flush()

    from context_compactor import ContextCompactor
    from context_compactor.session import Session

    def summarize(request):
        time.sleep(0.02)
        return "<summary>Worked on /srv/app.</summary>"

    path = sys.argv[1]
    c = ContextCompactor(
        max_context_tokens=3000, reserve_tokens=300, trigger_ratio=0.5, summarizer=summarize, background=True
    )
    s = Session("s", compactor=c, store=path)
    s.store._conn.set_progress_handler(lambda: time.sleep(0.0003) or 0, 20)
    if len(s) == 0:
        s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    i = len(s)
    while True:
        r = s.prepare()
        if r is not None:
            last = s.compactions()[-1]
            say("c", last.id, last.strategy)
        s.extend([
            {"role": "assistant", "content": f"Step {i}: " + "read /srv/app/mod.py and thought it through. " * 8},
            {"role": "user", "content": f"ok {i}"},
        ])
        say("a", i)
        i += 2
        time.sleep(0.005)
    """
)


def test_sigkill_during_the_swap_leaves_the_old_context_or_the_new(tmp_path: Path) -> None:
    rng = random.Random(16)
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    path = tmp_path / "k.db"
    acked: set[int] = set()
    compactions: set[int] = set()
    strategies: set[str] = set()
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split()]
        # Kill at a random moment after the child applied a background summary (a loaded machine
        # may take longer than any fixed sleep to get there), or after 20 s.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "summary" not in lines[-1][2:]:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.split())
        time.sleep(rng.uniform(0.0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        lines += [line.split() for line in rest.splitlines() if line.strip()]
        for kind, value, *rest in lines:
            (acked if kind == "a" else compactions).add(int(value))
            strategies.update(rest)
        integrity(path)
        s = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=path)
        history = s.history()
        steps = {m["content"].split(":")[0] for m in history if m["role"] == "assistant"}
        assert {f"Step {i}" for i in acked} <= steps
        ctx = s.context()
        assert validate_messages(ctx, format="openai") == []
        recs = s.compactions()
        assert compactions <= {c.id for c in recs}
        if recs:
            tail = history[recs[-1].upto_seq :]
            assert ctx[len(ctx) - len(tail) :] == tail, "the head's context, then every later original"
            assert not set(recs[-1].replaced) & set(s.context_ids())
        s.close()
    assert "summary" in strategies, "the kills should land after some background summaries were applied"


def test_clearing_tool_output_at_the_hard_threshold_keeps_the_running_job(tmp_path: Path) -> None:
    """Micro-compaction gets under the hard threshold while the job runs: the job is rebased onto it
    and its LLM summary still applies; the store and the Session agree on the context."""
    gate = Gate()
    path = tmp_path / "r.db"
    c = compactor(gate, max_context_tokens=6000, reserve_tokens=600, clear_at_least_tokens=100, micro_min_gain_ratio=0)
    s = Session("s", compactor=c, store=path)
    start(s)
    for k in range(6):
        s.extend(tool_round(100 + k, size=60))
    grow_to(s, "soft")
    assert s.prepare() is None and gate.entered.wait(5)
    job = s.pending
    j = 200
    while s.check().urgency != "hard":
        s.extend(tool_round(j, size=40))
        j += 1
    cleared = s.prepare()
    assert cleared is not None and cleared.strategy == "micro" and s.check().urgency != "hard"
    assert s.pending is job and job is not None and not job.cancelled
    gate.release.set()
    assert job.wait(5)
    result = s.prepare()
    assert result is not None and result.summary_source == "llm"
    ctx = s.context()
    assert validate_messages(ctx, format="openai") == []
    assert any("Checked the modules" in str(m.get("content")) for m in ctx)
    again = Session("s", compactor=ContextCompactor(max_context_tokens=6000, reserve_tokens=600), store=path)
    assert again.context() == ctx and again.context_ids() == s.context_ids()
    again.close()
    s.close()
    integrity(path)


def test_fast_growth_starts_the_summary_before_the_soft_threshold_and_holds_it_until_due() -> None:
    """The growth forecast: when the growth of the last calls would reach the hard threshold before a
    summary started at the soft threshold is ready, the summary starts now; its result waits until
    the compaction is due, then applies as usual."""
    gate = Gate(block=0)
    s = Session(compactor=compactor(gate, protected_tools=("bash",)), store=":memory:")  # only a summary can help
    cfg = s.compactor.config
    start(s)
    k = 0
    while s.pending is None:
        assert s.check().urgency == "none", "the forecast should start the summary below the soft threshold"
        s.extend(tool_round(k, size=110))
        k += 1
        assert s.prepare() is None
    job = s.pending
    assert job.early and s.check().current_tokens < cfg.soft_threshold
    assert job.wait(5)
    held = 0
    while s.check().current_tokens < cfg.soft_threshold:
        assert s.prepare() is None and s.pending is job  # done, held: not due yet
        held += 1
        s.extend(tool_round(k, size=10))
        k += 1
    assert held >= 1
    assert len(gate.requests) == 1  # the held summary is the only one made
    result = s.prepare()
    assert result is not None and result.summary_source == "llm" and s.pending is not job
    assert validate_messages(s.context(), format="openai") == []
    # The next summary may start in the same call: the forecast sees the recent growth (the
    # 110-line rounds) and the measured latency. At most one, the one now pending.
    assert len(gate.requests) <= 1 + (s.pending is not None)
    s.close()


def test_slow_growth_starts_the_summary_at_the_soft_threshold() -> None:
    gate = Gate(block=0)
    s = Session(compactor=compactor(gate), store=":memory:")
    start(s)
    k = 0
    while s.check().urgency == "none":
        assert s.prepare() is None and s.pending is None
        s.extend(tool_round(k, size=4))
        k += 1
    assert s.prepare() is None
    assert s.pending is not None and not s.pending.early
    s.close()


def test_asyncio_rule_summary_then_the_llm_summary_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """aprepare(): past the hard threshold at once (the jump not cut), the rule summary now, the LLM
    summary of the same snapshot in an asyncio task, re-applied by a later aprepare()."""
    monkeypatch.setattr(BackgroundPolicy, "cut_jumps", False)
    release = asyncio.Event()

    async def summarize(request: SummaryRequest) -> str:
        await release.wait()
        return SUMMARY

    async def main() -> None:
        s = Session(compactor=compactor(summarize), store=":memory:")
        start(s)
        for k in range(6):
            s.extend(tool_round(k, size=30))
        assert await s.aprepare() is None
        s.extend(tool_round(50, size=800))
        result = await s.aprepare()
        assert result is not None and result.summary_source == "rule"
        job = s.pending
        assert job is not None and job.upgrade is not None and not job.done()
        s.extend(tool_round(51, size=3))
        release.set()
        assert await job.await_done(5)
        late = await s.aprepare()
        assert late is not None and late.summary_source == "llm"
        assert ("reapply", late.tokens_after) in late.phases
        ctx = s.context()
        assert validate_messages(ctx, format="openai") == [] and ctx[-2:] == tool_round(51, size=3)
        s.close()

    asyncio.run(main())


def test_the_re_apply_on_both_stores(store_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-apply saved by SQLite and PostgreSQL alike: a reopened Session sees the same context,
    and expand() of the re-apply gives the originals the rule summary replaced (the jump not cut)."""
    monkeypatch.setattr(BackgroundPolicy, "cut_jumps", False)
    gate = Gate(block=1)
    s = Session("s", compactor=compactor(gate), store=store_target)
    start(s)
    for k in range(6):
        s.extend(tool_round(k, size=30))
    assert s.prepare() is None
    s.extend(tool_round(50, size=800))
    ruled = s.prepare()
    assert ruled is not None and ruled.summary_source == "rule"
    job = s.pending
    assert job is not None and job.upgrade is not None
    gate.release.set()
    assert job.wait(5)
    late = s.prepare()
    assert late is not None and late.summary_source == "llm"
    first, second = s.compactions()
    assert second.upto_seq == first.upto_seq and second.strategy == "summary"
    assert s.expand(second.id) == s.expand(first.id)
    ctx = s.context()
    again = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=store_target)
    assert again.context() == ctx and again.context_ids() == s.context_ids()
    again.close()
    s.close()


def test_an_early_summary_that_fails_before_it_is_due_only_starts_the_cooldown() -> None:
    gate = Gate(error=TimeoutError("the model timed out"), block=0)
    s = Session(compactor=compactor(gate, cooldown_calls=2, protected_tools=("bash",)), store=":memory:")
    start(s)
    k = 0
    while s.pending is None:
        s.extend(tool_round(k, size=110))
        k += 1
        assert s.prepare() is None
    job = s.pending
    assert job.early and job.wait(5) and job.error is not None
    assert s.check().urgency == "none"
    assert s.prepare() is None  # nothing compacted below the soft threshold
    assert s.compactions() == [] and s.pending is None
    assert s.state.cooldown_remaining == 2
    s.close()


def test_an_early_start_clears_tool_output_first_and_calls_no_llm_when_that_is_enough() -> None:
    """Planned as at the soft threshold: the selective rules first, the summarizer only when they
    cannot reach the target (an early start never turns a cheap compaction into an LLM call)."""
    gate = Gate(block=0)
    s = Session(compactor=compactor(gate), store=":memory:")
    start(s)
    k = 0
    while s.pending is None:
        s.extend(tool_round(k, size=110))
        k += 1
        assert s.prepare() is None
    job = s.pending
    assert job.early and job.wait(5)
    while s.check().urgency == "none":
        assert s.prepare() is None
        s.extend(tool_round(k, size=10))
        k += 1
    result = s.prepare()
    assert result is not None and result.strategy in ("micro", "selective") and result.summary_source is None
    assert gate.requests == []
    s.close()
