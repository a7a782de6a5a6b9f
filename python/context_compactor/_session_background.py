"""The background-compaction policy of :class:`~context_compactor.session.Session`: a part the
Session holds (:class:`BackgroundPolicy`).

What it does and costs is in :mod:`context_compactor._background`'s design note; this module
holds the part that decides, in ``prepare()``/``aprepare()``, when to start a job, apply a finished
one with the delta rule, clear tool output, cut a jump's output or apply the rule summary at the
hard threshold, and rebase a running job. It works on the Session's context through
:class:`~context_compactor._session_core.SessionCore`'s public methods.

Over 600 lines since the jump forecast: the start, apply, cut and upgrade rules read the same
forecast state (observed latencies, growth per call, jumps, the last call's growth), so they stay
in one policy class;
the forecast alone is the part to move out if it grows again.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from context_compactor import _background, _core
from context_compactor._background import Job
from context_compactor._recall_scope import session_scope
from context_compactor._session_core import Retry, SessionCore, Snapshot
from context_compactor._summarize import classify, describe
from context_compactor.compactor import CompactionCheck, ContextCompactor
from context_compactor.errors import SummarizerError
from context_compactor.plan import CompactionPlan
from context_compactor.results import CompactionPreview, CompactResult, RecordEntry, candidates_of

__all__ = ["BackgroundPolicy", "Job"]

log = logging.getLogger("context_compactor")


#: The growth forecast looks at the context's growth over this many ``prepare()`` calls.
FORECAST_CALLS = 5
#: A job is expected to take this many ``prepare()`` calls until one has been measured.
DEFAULT_JOB_CALLS = 2
#: The timed start: a summary is expected to take this many calls until the summarizer's latency
#: has been measured, and the measured latency is stretched by ``LATENCY_MARGIN``.
TIMED_DEFAULT_CALLS = 3.0
LATENCY_MARGIN = 1.5
#: A *jump* is one call that grows the context by more than the gap between the soft and the hard
#: threshold (a large tool output): from under the soft threshold to over the hard one, before any
#: summary started at the soft threshold can be ready. Once the conversation has made one, the
#: background summaries aim low enough that a call growing it as much (the largest seen) after them
#: still ends under the soft threshold, but not below this share of the budget.
JUMP_FLOOR_RATIO = 0.2
#: The bursty forecast: a growth of one call this many times the median of the last calls or more
#: is a burst, counted once in the growth a summary's calls are expected to bring.
BURST_RATIO = 3.0
#: At the hard threshold with a summary running, ``prepare()`` waits this long at most for it
#: (seconds), and at most ``HARD_WAIT_SHARE`` of the time per call, before a rule summary or a cut
#: applies instead. Only the calls that cross the hard threshold while a summary runs wait (under
#: 1% of the calls in ``make bench-background``: the p95 blocked time does not move).
HARD_WAIT_S = 0.05
HARD_WAIT_SHARE = 0.1
#: An early summary's repay check before the conversation has an LLM summary to measure by: a
#: narrative as long as the smallest one asked for (``summary_target_share``, never under 256
#: tokens). A plan that this would not repay (``min_savings_ratio``) is not sent to the summarizer:
#: e.g. right after a large read, which sits in the recent tail kept verbatim.
STAND_IN = "The work so far, in brief. " * 35


@dataclass(frozen=True)
class _Upgrade:
    """A rule-summary compaction a running job's LLM summary may replace (the late re-apply).

    ``result`` was computed on the job's snapshot and saved as compaction ``head``; its output is
    the first ``prefix`` rows of the context while ``head`` stays the head."""

    head: int | None
    prefix: int
    result: CompactResult


class BackgroundPolicy:
    """``background=True`` for a Session: the part it holds that decides, in ``prepare()`` /
    ``aprepare()``, when to start a job, apply a finished one with the delta rule, clear tool
    output or apply the rule summary at the hard threshold, and rebase a running job.

    It drives the Session's :class:`~context_compactor._session_core.SessionCore` through its
    public methods (``refresh``, ``make_check``, ``must_answer``, ``snapshot``, ``settle``) under
    the store's lock; :meth:`steps` is one ``prepare()``, for the sync and the async driver alike.
    """

    #: ``"timed"``; ``"calls"`` is the policy before issue 28, kept for ``make bench-background``
    #: to measure against in the same run: the forecast counts the calls the last jobs took (see
    #: :meth:`_job_calls`) and a rule summary at the hard threshold cancels a running job to start
    #: the LLM summary of its own snapshot.
    start_policy = "timed"
    #: The jump forecast (see :meth:`jump_line`); off: the timed policy as before it, kept for
    #: ``make bench-background`` to measure against in the same run.
    jump_forecast = True
    #: The cut of a jump (see :meth:`_cut_new`); off: the jump forecast as before it, kept for
    #: ``make bench-background`` to measure against in the same run.
    cut_jumps = True
    #: The bursty forecast (see :meth:`_growth_within`); off: the largest recent growth for every
    #: call, as before it. This, ``stand_in`` and ``cut_low`` off are the ``cuts`` policy, kept for
    #: ``make bench-background`` to measure against in the same run.
    bursty_forecast = True
    #: The early summary's repay check also before any LLM summary is known, with a stand-in
    #: narrative (see :func:`_stand_in`); off: no check until one is known, as before it.
    stand_in = True
    #: The cut of a jump aimed at the jump target when the context was under it before the call
    #: (see :meth:`_cut_aim`); off: half-way to the soft threshold, at least the target, as before.
    cut_low = True
    #: At the hard threshold, how long ``prepare()`` waits for a running summary (seconds, see
    #: :meth:`steps`); 0: never, as before.
    hard_wait_s = HARD_WAIT_S

    def __init__(self, core: SessionCore) -> None:
        self._core = core
        #: The job running or waiting to be applied.
        self.job: Job | None = None
        #: An LLM summary that arrived too late for its compaction, for the next one.
        self._carry: str | None = None
        self._rules: ContextCompactor | None = None
        #: Tokens after the previous ``prepare()``, the growth since then over the last calls, and
        #: the number of calls the last background jobs took (the growth forecast).
        self._bg_after: int | None = None
        self._bg_growth: deque[int] = deque(maxlen=FORECAST_CALLS)
        self._bg_latency: deque[int] = deque(maxlen=3)
        #: The timed start: when the previous ``prepare()`` began, the time between the last calls
        #: and how long the last summaries took (seconds, jobs that called the summarizer).
        self._bg_when: float | None = None
        self._bg_interval: deque[float] = deque(maxlen=FORECAST_CALLS)
        self._bg_seconds: deque[float] = deque(maxlen=3)
        #: The jumps of the whole conversation: growths of one call larger than the soft-to-hard
        #: gap (tokens; the jump forecast).
        self._bg_jumps: list[int] = []
        #: The context's size after the last compaction a finished job applied.
        self._bg_applied: int | None = None
        #: The row id of the context's last message after the previous ``prepare()``: the messages
        #: after it are this call's growth (the cut of a jump).
        self._bg_last_row: int | None = None
        #: The narrative of the last LLM summary a job made: an early job first checks that a
        #: summary as long would repay itself (``Job.expect``).
        self._bg_summary: str | None = None

    def rule_compactor(self) -> ContextCompactor:
        """The compactor without its summarizer: what runs when the agent must not wait (aimed at
        :meth:`jump_target` once the conversation has jumped)."""
        c = self._core.compactor
        aim = self.jump_target()
        cfg = c.config if aim is None else c.config.replace(target_ratio=aim / c.config.budget)
        if self._rules is None or self._rules.config != cfg:
            self._rules = ContextCompactor(cfg, on_before_compact=c.on_before_compact, on_compacted=c.on_compacted)
        return self._rules

    def cancel(self) -> None:
        """Cancel the job (its result is dropped)."""
        job, self.job = self.job, None
        if job is not None:
            job.cancel()

    # -- the growth forecast ---------------------------------------------------------------------------

    def _observe(self, check: CompactionCheck) -> None:
        """Remember how much the context grew since the previous ``prepare()``, and when."""
        if self._bg_after is not None and check.current_tokens >= self._bg_after:
            growth = check.current_tokens - self._bg_after
            self._bg_growth.append(growth)
            cfg = self._core.compactor.config
            if growth > cfg.hard_threshold - cfg.soft_threshold:
                self._bg_jumps.append(growth)
        now = _background.clock()
        if self._bg_when is not None:
            self._bg_interval.append(now - self._bg_when)
        self._bg_when = now

    def _job_calls(self) -> float:
        """How many ``prepare()`` calls a background summary is expected to take.

        ``timed``: the summarizer's latency (the longest of the last three summaries, seconds,
        times ``LATENCY_MARGIN``) over the time per call (the median of the last
        ``FORECAST_CALLS`` intervals between ``prepare()`` calls), plus the call that applies it;
        ``TIMED_DEFAULT_CALLS`` until both are measured. ``calls``: the most calls one of the last three jobs took, else
        ``DEFAULT_JOB_CALLS``."""
        if self.start_policy == "calls":
            return max(self._bg_latency) if self._bg_latency else DEFAULT_JOB_CALLS
        if not self._bg_seconds or not self._bg_interval:
            return TIMED_DEFAULT_CALLS
        per_call = max(statistics.median(self._bg_interval), 1e-3)
        # + 1: a summary is applied by the first prepare() after it is ready.
        return LATENCY_MARGIN * max(self._bg_seconds) / per_call + 1

    def _jump(self) -> int:
        """The largest jump of this conversation (a growth of one call larger than the soft-to-hard
        gap), else 0. Not with the ``calls`` policy (the baseline)."""
        if self.start_policy == "calls" or not self.jump_forecast:
            return 0
        return max(self._bg_jumps, default=0)

    def jump_target(self) -> int | None:
        """Where a background summary aims once the conversation has jumped: the soft threshold
        less the largest jump, at least ``JUMP_FLOOR_RATIO`` of the budget, never above the
        target. ``None``: no jump seen, or the target is already that low."""
        jump = self._jump()
        if not jump:
            return None
        cfg = self._core.compactor.config
        aim = max(math.ceil(JUMP_FLOOR_RATIO * cfg.budget), cfg.soft_threshold - jump)
        return aim if aim < cfg.target_tokens else None

    def jump_line(self) -> int | None:
        """Once the conversation has jumped: the context from which one call growing it by the
        largest jump would cross the hard threshold (at least the soft-to-hard gap above
        :meth:`jump_target`, so that a compaction there frees that much). From there an early
        summary starts, and one that is ready is applied. ``None``: no jump seen."""
        aim = self.jump_target()
        if aim is None:
            return None
        cfg = self._core.compactor.config
        line = max(cfg.hard_threshold - self._jump(), aim + cfg.hard_threshold - cfg.soft_threshold)
        return line if line < cfg.soft_threshold else None

    def _forecast_due(self, check: CompactionCheck) -> bool:
        """Below the soft threshold: start the summary now, because at the growth of the recent
        calls (the largest of the last ``FORECAST_CALLS``) the context would reach the hard
        threshold before a summary started at the soft threshold is ready; or, once the
        conversation has jumped, because it is over the :meth:`jump_line`."""
        if check.should_compact or not self._bg_growth:
            return False
        if self._core.compactor.summarizer is None or self._core.state.cooldown_remaining > 0:
            return False  # no LLM summary to get ahead of
        line = self.jump_line()
        if line is not None and check.current_tokens >= line:
            # Not again right after a compaction: only once the context grew by half the
            # soft-to-hard gap since (a summary every other call would break the cached prefix as
            # often; a whole gap started too late for the next jump in the bench).
            cfg = self._core.compactor.config
            gap = cfg.hard_threshold - cfg.soft_threshold
            if self._bg_applied is None or check.current_tokens >= self._bg_applied + gap // 2:
                return True
        if check.current_tokens < check.target_tokens:
            return False
        return check.current_tokens + self._growth_within(self._job_calls()) >= check.hard_threshold

    def _growth_within(self, calls: float) -> float:
        """The growth expected over ``calls`` calls: the largest growth of the last
        ``FORECAST_CALLS`` calls for every call; with ``bursty_forecast``, when that largest is a
        burst (``BURST_RATIO`` times their median or more: a large read between small steps), it
        once and the median for the other calls. A burst counted for every call started summaries
        in conversations that ended (or paused) before they were due; a growth that is merely
        uneven (the largest under ``BURST_RATIO`` times the median) keeps the largest for every
        call, since the median there came too late for a slow summary."""
        top = max(self._bg_growth)
        if self.start_policy == "calls" or not self.bursty_forecast:
            return calls * top
        typical = statistics.median(self._bg_growth)
        if top < BURST_RATIO * typical:
            return calls * top
        return top + max(0.0, calls - 1) * typical

    def _hard_wait(self) -> float:
        """How long ``prepare()`` waits at the hard threshold for a running summary (seconds):
        ``hard_wait_s``, and at most ``HARD_WAIT_SHARE`` of the time per call (the median of the
        last ``FORECAST_CALLS`` intervals between ``prepare()`` calls) once that is measured."""
        if not self._bg_interval:
            return self.hard_wait_s
        return min(self.hard_wait_s, HARD_WAIT_SHARE * statistics.median(self._bg_interval))

    def _job_done(self, job: Job) -> None:
        self._bg_latency.append(job.calls + 1)
        if job.summarizer_calls and job.finished is not None and job.error is None:
            self._bg_seconds.append(job.finished - job.started)
            result = job.result
            if result is not None and result.summary_source == "llm" and result.summary:
                self._bg_summary = _background.narrative(result.summary) or None

    def _expect(self) -> str | None:
        """What an early job's repay check applies its plan with: the narrative of the last LLM
        summary, else (``stand_in``) a stand-in as long as the smallest summary asked for."""
        if self._bg_summary is not None or not self.stand_in:
            return self._bg_summary
        return STAND_IN

    def steps(self, instructions: str | None) -> Generator[tuple[str, Any], Any, CompactResult | None]:
        """One ``prepare()`` with ``background=True``, for both drivers: yields ``("hook", (fn,
        arg))``, ``("now", None)`` (a compaction with the rule summary, now), ``("run", job)`` (run a
        job in the foreground), ``("wait", (job, seconds))`` (wait that long at most for a running job)
        and ``("start", job)`` (start it in the background)."""
        c = self._core.compactor
        applied: CompactResult | None = None
        try:
            with self._core.store.locked():
                self._core.refresh()
                check = self._core.make_check()
            self._observe(check)
            job = self.job
            if (
                job is not None
                and self.hard_wait_s > 0
                and not job.done()
                and not job.cancelled
                and self._core.must_answer(check)
            ):
                # At the hard threshold a running summary that is about to finish is worth a short
                # wait (:meth:`_hard_wait`): else a rule summary or a cut applies now.
                yield ("wait", (job, self._hard_wait()))
            if job is not None and not job.done():
                job.calls += 1
            elif job is not None:
                # An early job's result waits until the compaction is due (soft or hard).
                line = self.jump_line()
                due = (
                    check.should_compact
                    or self._core.must_answer(check)
                    or (line is not None and check.current_tokens >= line)
                )
                idle = job.early and job.upgrade is None and job.error is None and not due
                if idle and job.result is not None and not job.result.changed:
                    # An early job that found nothing to compact: dropped, so that a later one can
                    # start on a larger snapshot.
                    self.job = None
                    self._job_done(job)
                elif not idle:
                    self.job = None
                    if not job.cancelled:
                        self._job_done(job)
                    applied = self._finish(job, due or not job.early)
                    if applied is not None and not applied.changed:
                        applied = None  # an early job that found nothing to compact
                    if applied is not None:
                        self._bg_applied = self._core.make_check().current_tokens
                    if applied is not None and c.on_compacted is not None:
                        yield ("hook", (c.on_compacted, applied))
            result = yield from self._background_rest(instructions, applied)
            return result
        finally:
            self._bg_after = self._core.make_check().current_tokens  # the in-memory counts: no store call
            self._bg_last_row = self._core.rows[-1] if self._core.rows else None

    def _background_rest(
        self, instructions: str | None, applied: CompactResult | None
    ) -> Generator[tuple[str, Any], Any, CompactResult | None]:
        c = self._core.compactor
        with self._core.store.locked():
            self._core.refresh()
            check = self._core.make_check()
            self._core.last_check = check
            must = self._core.must_answer(check)
        # At the hard threshold, first what costs no LLM call: clearing old tool output, which may be
        # enough to get under it (a running job is kept, rebased: positions are kept); then the
        # running job's own plan with the rule summary, over its snapshot, when that and the delta
        # get under it (the job's LLM summary replaces the rule summary when it arrives: same span).
        steps: tuple[Callable[[], CompactResult | None], ...] = (
            lambda: self._micro_under(self.job),
            lambda: self._cut_new(self.job),
            lambda: self._rule_from_job(self.job) if self.job else None,
        )
        for step in steps:
            done = step() if must else None
            if done is not None:
                applied = done
                if c.on_compacted is not None:
                    yield ("hook", (c.on_compacted, done))
                with self._core.store.locked():
                    check = self._core.make_check()
                    self._core.last_check = check
                    must = self._core.must_answer(check)
        if must:
            # Never wait at the hard threshold: the rule summary now (a top-up over the summary just
            # applied, or over a running job's snapshot, which is then dropped), and its LLM summary
            # in the background over the same snapshot, to replace it when it arrives.
            self._core.last_snap = None
            now: CompactResult | None = yield ("now", None)
            snap = self._core.last_snap
            if now is not None and snap is not None and now.summary_source == "rule" and now.changed:
                upgrade = self._upgrade_job(snap, now, instructions)
                if upgrade is not None:
                    yield ("start", upgrade)
            return now if now is not None else applied
        if not check.should_compact:
            if check.micro_due and self.job is None:
                micro: CompactResult | None = yield ("now", None)
                if micro is not None:
                    return micro
            if self.job is not None or not self._core.msgs or not self._forecast_due(check):
                return applied
            early = True
        else:
            early = False
        if self.job is not None or not self._core.msgs:
            return applied
        with self._core.store.locked():
            snap = self._core.snapshot()
        make_plan = self._planner(snap, instructions, early=early)

        plan: CompactionPlan | None = None
        flushed = 0
        forced = False
        if c.on_before_compact is not None:
            plan = make_plan()
            request = plan.request
            preview = CompactionPreview(
                snap.messages,
                plan.tokens_before,
                request,
                request.replaced_count if request else 0,
                background=True,
                _candidates=candidates_of(plan),
            )
            yield ("hook", (c.on_before_compact, preview))
            if preview.vetoed:
                return applied
            flushed = preview._flushed
            if preview._summary is not None:
                done = self._late(snap, plan.apply(preview._summary, flushed_memories=flushed), None)
                if done is not None and c.on_compacted is not None:
                    yield ("hook", (c.on_compacted, done))
                return done if done is not None else applied
            forced = preview.forced
        job = Job(
            make_plan,
            snap,
            c.summarizer,
            c.config,
            plan=plan,
            carried=self._carry,
            flushed=flushed,
            early=early and not forced,
            expect=self._expect() if early and not forced else None,
        )
        if forced:
            yield ("run", job)
            done = self._finish(job)
            if done is not None and c.on_compacted is not None:
                yield ("hook", (c.on_compacted, done))
            return done if done is not None else applied
        self.job = job
        yield ("start", job)
        return applied

    def _micro_under(self, job: Job | None) -> CompactResult | None:
        """Micro-compaction now, saved only when it brings the context under the hard threshold.

        While ``job`` runs it must also only edit messages in place (none removed or inserted):
        the job is then rebased onto it, its snapshot's rows becoming the edited copies at the
        same positions, and its summary still applies."""
        c = self._core.compactor
        cfg = c.config
        with self._core.store.locked():
            self._core.refresh()
            if job is not None and self._core.head != job.snap.head:
                return None
            snap = self._core.snapshot()
            rows = self._core.rows
            last = self._bg_last_row
            # The messages appended since the previous prepare() (this call's growth): never sent,
            # so not in the provider's cache.
            first_new = rows.index(last) + 1 if last is not None and last in rows else len(rows)
        with session_scope():
            result = c.micro_compact(snap.messages, **self._snap_args(snap))
            if not result.compacted and cfg.micro_min_gain_ratio > 0:
                # The cache rule (``micro_min_gain_ratio``) weighs what a clearing frees against the
                # cached prefix it makes the provider write again. At the hard threshold the
                # alternative is the cut of a jump (which rewrites nothing cached: the clearing
                # must repay the rewrite of the cached part, this call's growth left out, as it is
                # written anyway) or the rule summary (which rewrites the context from the
                # summary on, more than a clearing does, and replaces the narrative: a clearing
                # that gets under the hard threshold is taken, and a running summary still
                # applies).
                loose = ContextCompactor(cfg.replace(micro_min_gain_ratio=0.0))
                again = loose.micro_compact(snap.messages, **self._snap_args(snap))
                edited = [e.index for e in again.record]
                if (
                    again.compacted
                    and edited
                    and (
                        not self._jumped(first_new, snap)
                        or again.tokens_before - again.tokens_after
                        >= cfg.micro_min_gain_ratio * sum(snap.tokens[min(edited) : first_new])
                    )
                ):
                    result = again
        if not result.compacted or result.tokens_after >= min(cfg.hard_threshold, cfg.budget + 1):
            return None
        return self._in_place(snap, result, job)

    def _snap_args(self, snap: Snapshot) -> dict[str, Any]:
        """The keywords of a compaction of ``snap`` (its system, the session's tools, format and state)."""
        return {"system": snap.system, "tools": self._core.tools, "format": self._core.fmt, "state": self._core.state}

    def _before_growth(self, growth: Sequence[int]) -> int:
        """The context's tokens before this call's growth (``growth``: its messages' raw counts,
        calibrated as ``check()`` counts them)."""
        raw = sum(growth)
        if self._core.state.observations:
            raw = math.ceil(raw * self._core.state.calibration)
        return self._core.make_check().current_tokens - raw

    def _jumped(self, first_new: int, snap: Snapshot) -> bool:
        """Whether the context was under the soft threshold before this call's growth (the messages
        of ``snap`` from ``first_new`` on), so that the cut of a jump may meet it."""
        if first_new >= len(snap.messages):
            return False
        return self._before_growth(snap.tokens[first_new:]) < self._core.compactor.config.soft_threshold

    def _in_place(self, snap: Snapshot, result: CompactResult, job: Job | None) -> CompactResult | None:
        """Save ``result`` (a compaction of ``snap`` that removed or inserted nothing while ``job``
        runs: else ``None``) and rebase the running job onto it: its snapshot's rows become the
        edited copies at the same positions, and its summary still applies."""
        if job is not None and (
            len(result.origins) != len(snap.messages)
            or any(kind not in ("kept", "edited") or i != pos for pos, (kind, i) in enumerate(result.origins))
        ):
            return None
        done = self._core.settle(snap, result)
        if done is None or isinstance(done, Retry):
            return None
        if job is not None:
            with self._core.store.locked():
                n = len(snap.messages)
                covered = job.snap.covered if job.snap.covered is not None else len(job.snap.messages)
                job.snap = Snapshot(
                    list(self._core.msgs[:n]),
                    list(self._core.rows[:n]),
                    list(self._core.tok[:n]),
                    self._core.head,
                    snap.upto_seq,
                    job.snap.system,
                    covered,
                )
        return done

    def _cut_new(self, job: Job | None) -> CompactResult | None:
        """At the hard threshold, when the context was under the soft threshold before this call's
        growth (the messages appended since the previous ``prepare()``, e.g. one large read): that
        growth's tool output and arguments cut head + tail (marked, recorded ``shortened``, the
        originals kept), nothing else touched, instead of a rule summary. The narrative in the
        context (an LLM summary, or none yet) and the cached prefix up to this call stay; the cut
        aims half-way from where the context was to the soft threshold, at least the target, so
        that the next calls have room. ``None`` when it would touch an older message, summarise,
        or not get under the soft threshold (then the rule summary applies as before)."""
        last = self._bg_last_row
        c = self._core.compactor
        cfg = c.config
        if last is None or c.summarizer is None or not self.cut_jumps:
            return None
        with self._core.store.locked():
            self._core.refresh()
            if job is not None and self._core.head != job.snap.head:
                return None
            rows = self._core.rows
            if last not in rows:
                return None  # another connection compacted it: no growth to tell apart
            first = rows.index(last) + 1
            if first >= len(rows):
                return None
            before = self._before_growth(self._core.tok[first:])
            snap = self._core.snapshot()
        if before >= cfg.soft_threshold:
            return None
        aim = self._cut_aim(before)
        n = len(snap.messages)
        cut = ContextCompactor(
            cfg.replace(
                keep_recent_messages=n,
                keep_recent_tool_results=n,
                target_ratio=min(1.0, aim / cfg.budget),
                retry_growth_tokens=0,
            )
        )
        with session_scope():
            result = cut.compact(snap.messages, pinned=list(range(first)), **self._snap_args(snap))
        if (
            not result.compacted
            or result.over_budget
            or result.summary_source is not None
            or result.tokens_after > cfg.soft_threshold
            or len(result.origins) != n
            or any(e.index < first for e in result.record)
            or any(
                kind not in ("kept", "edited") or i != pos or (kind == "edited" and pos < first)
                for pos, (kind, i) in enumerate(result.origins)
            )
        ):
            return None
        done = self._in_place(snap, result, job)
        if done is not None:
            # The cut output sits in the kept tail: an early summary before the context grows by
            # half the soft-to-hard gap again would find little to replace (as after an apply).
            self._bg_applied = self._core.make_check().current_tokens
        return done

    def _cut_aim(self, before: int) -> int:
        """Where the cut of a jump aims, the context being at ``before`` before the call: half-way
        to the soft threshold, at least the target. With ``cut_low``, when ``before`` is under the
        :meth:`jump_target` (the conversation has barely started: the first large read), at the
        jump target instead, at least a quarter of the way to the soft threshold: the next call
        then has room for a large read too, as after a summary aimed there (a second read the
        next call crossed the hard threshold again and was cut too)."""
        cfg = self._core.compactor.config
        soft = cfg.soft_threshold
        aim = min(soft, max(cfg.target_tokens, before + (soft - before) // 2))
        low = self.jump_target() if self.cut_low else None
        if low is not None and low > before:
            aim = min(aim, max(low, before + (soft - before) // 4))
        return aim

    def _fits(self, tokens_after: int, delta: list[int]) -> bool:
        """Whether a compaction's output (``tokens_after``) followed by ``delta`` (the token counts of
        the messages appended after its snapshot) stays under the hard threshold and the budget."""
        cfg = self._core.compactor.config
        raw = sum(delta)
        if self._core.state.observations:
            raw = math.ceil(raw * self._core.state.calibration)
        return tokens_after + raw < min(cfg.hard_threshold, cfg.budget + 1)

    def _rule_from_job(self, job: Job) -> CompactResult | None:
        """At the hard threshold while ``job`` runs: its plan applied with the rule summary, saved
        with the delta when that gets under the hard threshold; the job then re-applies its LLM
        summary over the same span when it arrives (``job.upgrade``)."""
        plan = job.plan
        if plan is None or job.upgrade is not None or job.cancelled or job.done():
            return None
        with self._core.store.locked():
            self._core.refresh()
            if self._core.head != job.snap.head:
                return None
            n = len(job.snap.messages)
            delta = list(self._core.tok[n:])
        result = plan.apply(None, flushed_memories=job._flushed)
        if not result.changed or result.over_budget or not self._fits(result.tokens_after, delta):
            return None
        done = self._core.settle(job.snap, result)
        if done is None or isinstance(done, Retry):
            return None
        job.upgrade = _Upgrade(self._core.head, _prefix(job.snap, result), result)
        return done

    def _planner(
        self, snap: Snapshot, instructions: str | None, *, early: bool = False
    ) -> Callable[[], CompactionPlan]:
        """The plan of ``snap`` as a job makes it (in its thread or task). ``early``: planned as if
        the soft threshold were where the context is now, so that clearing tool output or the
        selective rules still come first and the summarizer is called only when they cannot reach
        the target (as at the soft threshold; ``force`` would always summarise). Once the
        conversation has jumped, aimed at :meth:`jump_target` (as the rule summary at the hard
        threshold is: an upgrade keeps what it kept)."""
        c = self._core.compactor
        aim = self.jump_target()
        if early or aim is not None:
            cfg = c.config
            changes: dict[str, Any] = {}
            if early:
                changes["soft_threshold_tokens"] = max(1, min(sum(snap.tokens), cfg.soft_threshold))
                # Its soft threshold is where the context was: ending above it is no sign of a
                # compaction loop, so it sets no hold (``retry_growth_tokens``) on the state.
                changes["retry_growth_tokens"] = 0
            if aim is not None:
                changes["target_ratio"] = aim / cfg.budget
            c = ContextCompactor(cfg.replace(**changes), summarizer=c.summarizer)

        def make_plan() -> CompactionPlan:
            with session_scope():
                return c.plan(snap.messages, instructions=instructions, **self._snap_args(snap))

        return make_plan

    def _upgrade_job(self, snap: Snapshot, ruled: CompactResult, instructions: str | None) -> Job | None:
        """After a rule summary at the hard threshold (``ruled``, saved from ``snap``): the LLM
        summary of the same snapshot in the background, to replace it when it arrives. Not while a
        job still runs (one summarizer call at a time): that job's summary, of an older snapshot,
        feeds the next compaction instead; a finished one waiting to be applied is dropped (its
        snapshot is part of this one)."""
        c = self._core.compactor
        if c.summarizer is None or self._core.state.cooldown_remaining > 0:
            return None
        running = self.job is not None and not self.job.done() and not self.job.cancelled
        if running and self.start_policy != "calls":
            # One summary at a time: the running one (of an older snapshot) goes on; it arrives
            # after this compaction and becomes the previous_summary of the next one.
            return None
        self.cancel()
        upgrade = _Upgrade(self._core.head, _prefix(snap, ruled), ruled)
        job = Job(
            self._planner(snap, instructions),
            snap,
            c.summarizer,
            c.config,
            carried=self._carry,
            upgrade=upgrade,
        )
        self.job = job
        return job

    def _reapply(self, job: Job, late: CompactResult) -> CompactResult | None:
        """Replace the rule summary of ``job.upgrade`` by ``late`` (the job's LLM or provider
        summary of the same snapshot), when that compaction is still the head and the result fits
        under the hard threshold. The kept and edited messages are the same rows; the rows only the
        rule compaction produced (its summary) are recorded as replaced. ``None``: not possible."""
        up: _Upgrade = job.upgrade
        ruled = up.result
        with self._core.store.locked():
            self._core.refresh()
            if self._core.head != up.head or len(self._core.msgs) < up.prefix:
                return None
            msgs, rows, tok = (
                list(self._core.msgs[: up.prefix]),
                list(self._core.rows[: up.prefix]),
                list(self._core.tok[: up.prefix]),
            )
            delta = list(self._core.tok[up.prefix :])
            current = self._core.make_check().current_tokens
            upto, system = self._core.upto, self._core.system
        # Where each kept or edited message of the rule compaction sits in the context now.
        at = {o: k for k, o in enumerate(ruled.origins) if o[0] in ("kept", "edited")}
        origins: list[tuple[str, int | None]] = []
        used: set[int] = set()
        # An edited message may differ (the last block is cut to what fits next to the summary):
        # a new copy of the rule compaction's copy, recorded as such.
        actions = {e.index: e.action for e in late.record}
        recut: list[RecordEntry] = []
        for m, o in zip(late.messages, late.origins, strict=True):
            if o[0] in ("kept", "edited"):
                k = at.get(o)
                if k is None or k in used:
                    return None  # the two compactions differ in what they kept
                used.add(k)
                if o[0] == "edited" and ruled.messages[k] != m:
                    origins.append(("edited", k))
                    action = actions.get(o[1], "shortened") if o[1] is not None else "shortened"
                    recut.append(RecordEntry(k, action, "cut again to fit next to the late summary"))
                else:
                    origins.append(("kept", k))
            else:
                origins.append((o[0], None))
        gone = [k for k in range(len(ruled.messages)) if k not in used]
        after = current - ruled.tokens_after + late.tokens_after
        if not any(o[0] != "kept" for o in origins) or not self._fits(late.tokens_after, delta):
            return None
        record = tuple(
            RecordEntry(
                k,
                "summarized" if ruled.origins[k][0] in ("summary", "inserted") else "dropped",
                f"rule summary replaced by the late {late.summary_source} summary of the same span",
            )
            for k in gone
        ) + tuple(recut)
        covered = len(ruled.messages) if up.prefix > len(ruled.messages) else None
        snap = Snapshot(msgs, rows, tok, up.head, upto, system, covered)
        result = replace(
            late,
            tokens_before=current,
            tokens_after=after,
            original_count=len(msgs),
            retained_count=len(used),
            compacted_count=len(gone),
            origins=tuple(origins),
            record=record,
            phases=(*late.phases, ("reapply", after)),
        )
        done = self._core.settle(snap, result)
        if done is None or isinstance(done, Retry):
            return None
        log.info(
            "session %s: a late background summary replaced the rule summary of compaction %s", self._core.id, up.head
        )
        return done

    def _finish(self, job: Job, due: bool = True) -> CompactResult | None:
        """Apply a finished job with the delta rule (its failure: the rule summary, cool-down; an
        early job's failure before the compaction is ``due``: only the cool-down)."""
        if job.cancelled:
            return None
        result = job.result
        if job.error is not None:
            exc = job.error
            if result is None:  # not a fallback (the core's driver's): the failure is raised
                if isinstance(exc, SummarizerError) and exc.__cause__ is not None:
                    exc = exc.__cause__  # the driver's "raise" step: its cause is the summarizer's failure
                raise SummarizerError(f"the background summarizer failed ({classify(exc)}): {describe(exc)}") from exc
            if job.cooldown_calls:
                _core.start_cooldown(self._core.state, job.cooldown_calls)
            if not due:
                return None
        if result is None:
            return None
        if job.upgrade is not None:
            if result.summary_source not in (None, "rule"):
                done = self._reapply(job, result)
                if done is not None:
                    if job.carried is not None and self._carry is job.carried:
                        self._carry = None
                    return done
            # The rule summary stays; an LLM summary feeds the next compaction.
            if result.summary_source == "llm" and result.summary:
                self._carry = result.summary
            return None
        return self._late(job.snap, result, job.carried)

    def _late(self, snap: Snapshot, result: CompactResult, carried: str | None) -> CompactResult | None:
        """Save a compaction made on an earlier snapshot; when the context it was made for was
        replaced meanwhile, keep its LLM summary for the next compaction instead."""
        with self._core.store.locked():
            self._core.refresh()
            stale = self._core.head != snap.head
        done = None if stale else self._core.settle(snap, result)
        if isinstance(done, Retry):
            done = None
            stale = True
        if stale:
            if result.summary_source == "llm" and result.summary:
                log.info(
                    "session %s: a background summary arrived after a newer compaction; kept for the next",
                    self._core.id,
                )
                self._carry = result.summary
            return None
        if carried is not None and self._carry is carried and result.summary_source == "llm":
            self._carry = None
        return done


def _prefix(snap: Snapshot, result: CompactResult) -> int:
    """How many rows of the context a compaction of ``snap`` saved as ``result`` produced (its
    messages, then the snapshot's rows past ``covered`` for a rebased job)."""
    extra = len(snap.rows) - snap.covered if snap.covered is not None else 0
    return len(result.messages) + extra
