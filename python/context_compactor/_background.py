"""Speculative background compaction: a summary made on a snapshot while the agent keeps going.

Design note.

With ``background=True`` a :class:`~context_compactor.session.Session` does not wait for the
summarizer. From the soft threshold, ``prepare()`` takes a *snapshot* of the context (its rows,
the head compaction and the last original's seq), starts a :class:`Job` on it and returns at once:
a thread for ``prepare()``, an asyncio task for ``aprepare()``. The job plans the compaction of
the snapshot (pure: the planner never sees later messages), calls the summarizer (chunk by chunk
for long spans) and applies the reply to the plan, all off the agent's path. A later
``prepare()`` finds it done and saves it with the store's delta rule: the snapshot's context is
replaced by the compaction's output and every message appended since (the *delta*) follows it
verbatim, in one transaction (DESIGN invariant 4: same snapshot + delta + summary ⇒ same output).

What it costs: the summary covers the conversation up to the snapshot, so the messages appended
while it ran stay verbatim after it (they are the most recent ones, which the next compaction
summarises in turn), and the context is above the soft threshold for the few calls the summary
takes. When the delta alone keeps the context at or over the hard threshold, an incremental
top-up runs at once with the built-in rule summary (it extends the summary just applied; no
blocking LLM call), and a new background job starts when it is over the soft threshold again.

The hard threshold waits only briefly: a running job gets up to ``hard_wait_s`` (50 ms, at most a
tenth of the time per call) to finish, and is then applied as usual. Then micro-compaction, when
it gets the context under it (a running job is rebased onto its in-place edits). Then, when one
call took the context from under the soft threshold past the hard one, the cut of that call's
output alone (head + tail, nothing older touched, no summary: ``BackgroundPolicy._cut_new``;
rebased the same way). Else the rule summary applies now: over the
running job's own snapshot and plan when that plus the delta fits under the hard threshold (the job
goes on), else over the whole context, after which a new job makes the LLM summary of that same
snapshot, unless a job is still running (one summarizer call at a time: its summary, of an older
snapshot, arrives after the rule compaction and feeds the next one). Such a job carries the
rule compaction it may *upgrade* (``Job.upgrade``): when its summary arrives and that compaction is
still the head, the **late re-apply** saves a compaction over the rule compaction's output (its
kept and edited rows reused, the rule summary's row recorded as replaced, ``upto_seq`` unchanged,
so the delta rule still holds) with the LLM summary (or a native strategy's items) in place of the
rule summary, provided the result fits under the hard threshold and the budget. Otherwise the rule
summary stays and an LLM summary becomes the ``previous_summary`` of the next LLM compaction, so
the work is not lost. A re-apply is a second change at the start of the context (one more
prompt-cache miss) bought for the better summary.

The growth forecast: each ``prepare()`` notes how much the context grew since the previous one
and how long ago that was; below the soft threshold (and at or above the target), when the growth
expected over the calls a summary takes (the summarizer's observed latency over the time per call)
reaches the hard threshold, a job starts now (the largest growth of the last ``FORECAST_CALLS``
calls for every call, or once with their median for the others when it is a burst,
``BURST_RATIO`` times the median or more) (``Job.early``: planned as if the soft threshold were
where the context is, so clearing and the selective rules come first and the summarizer is called
only when they cannot reach the target). Its result is held until the compaction is due, then
applied with the delta as usual. Once a call has grown the context by more than the soft-to-hard
gap (a *jump*), the jump forecast (``BackgroundPolicy.jump_line``) aims the summaries low enough
for such a call to fit after them, starts one early from where such a call would cross the hard
threshold and applies a ready one there.

A job takes the steps of a foreground compaction: ``Job._steps`` runs ``_driver.steps`` (the core
driver's chunk loop, failure classes, fallback to the rule summary and cool-down: one copy, shared
with ``compact()`` and the Rust API) without hooks, and the thread (``run``) and the task
(``arun``, each step in a worker thread) only make the summarizer calls, with the compaction's
deadline and the cancel event. A job that fails has its plan applied with the rule summary and
``fallback_reason`` set, keeping the chunks summarised before the failure, as a synchronous
compaction would; the Session starts the cool-down the driver named (``Job.cooldown_calls``) when
it takes the result, and raises by the next ``prepare()`` an error that ``on_summarizer_error``
says to raise. ``prepare(force=True)``
and ``close()`` cancel a running job: its result is dropped, a task is cancelled, a thread stops
waiting at once (the user's summarizer call itself cannot be interrupted in a thread: it runs on
in its daemon thread and its reply is discarded). A job never touches the store: only the
Session's ``prepare()`` saves, so nothing is written after ``close()``.

Native strategies (a summarizer with ``wants_span``) get the snapshot's span in the request; the
provider's items are placed over the plan in the job (``_provider_items.place_items``), so they are
applied, re-applied and failed like any other summary.

A bare :class:`~context_compactor.ContextCompactor` keeps no pending job (it is immutable and
stateless by design): the same pattern is ``plan = compactor.plan(snapshot, state=state)``, the
summary in your own thread or task, then ``plan.apply(reply).messages + messages[len(snapshot):]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from context_compactor import _core, _driver
from context_compactor import telemetry as _otel
from context_compactor._summarize import Cancelled, Deadline, call_async, call_sync
from context_compactor.config import CompactionConfig
from context_compactor.errors import SummarizerError
from context_compactor.plan import CompactionPlan
from context_compactor.results import CompactResult, SummaryRequest

__all__ = ["Job", "narrative", "with_previous"]

#: The clock jobs and the growth forecast time themselves with (seconds; a test may replace it).
clock = time.monotonic


def narrative(summary: str) -> str:
    """A summary message's narrative: without its marker line and its ledger."""
    lines = summary.strip().splitlines()
    if lines and lines[0].startswith(_core.SUMMARY_MARKER):
        lines = lines[1:]
    if _core.LEDGER_SENTINEL in lines:
        lines = lines[: lines.index(_core.LEDGER_SENTINEL)]
    return "\n".join(lines)


def with_previous(request: SummaryRequest, carried: str) -> SummaryRequest:
    """``request`` with a summary that arrived too late (``carried``) put before its previous
    summary: the next summary then builds on it instead of on the rule summary alone. Only its
    narrative: the ledger after its sentinel line is the library's, carried by the compaction."""
    carried = narrative(carried).strip()
    if not carried:
        return request
    old = request.previous_summary
    if old and old.strip() and old.strip() in request.user_prompt:
        merged = f"{carried}\n\n{old.strip()}"
        prompt = request.user_prompt.replace(old.strip(), merged, 1)
    else:
        merged = carried
        prompt = f"<previous_summary>\n{carried}\n</previous_summary>\n\n{request.user_prompt}"
    return replace(request, previous_summary=merged, user_prompt=prompt)


def _next(
    steps: Generator[tuple[str, Any], Any, CompactResult], value: Any, error: BaseException | None
) -> tuple[SummaryRequest | None, CompactResult | None]:
    """One step of a job's compaction (``Job._steps``) with the summarizer's reply (``value``) or
    failure (``error``): the next request, or ``None`` and the result."""
    try:
        _, request = steps.throw(error) if error is not None else steps.send(value)
    except StopIteration as stop:
        return None, stop.value
    return request, None


def _too_small(plan: CompactionPlan, expect: str) -> CompactResult | None:
    """Before an early job calls the summarizer: the plan applied with ``expect`` (the narrative of
    the conversation's last LLM summary, standing in for the one it would get), when that changes
    nothing (it saves less than ``min_savings_ratio``: the span is small next to the summary, e.g.
    when most of the context is the recent tail); else ``None``. Single-chunk plans only."""
    if plan.request is None or plan.remaining_chunks > 1:
        return None
    probe = plan._dry_apply(expect)
    return None if probe.changed else probe


_Inbox = queue.SimpleQueue[Callable[[], None]]


class _Workers:
    """The daemon threads thread jobs run in, kept for the next job once idle.

    ``threading.Thread.start()`` waits until the new thread runs: a few ms on a loaded machine
    (15 ms on average with a load of 12 on two cores), on the agent's path, in the ``prepare()``
    that starts a job: the largest part of its p95 blocked time. An idle worker gets the job
    through its queue without waiting. A worker stays busy while its job runs (a summarizer call
    that hangs keeps it: another worker starts for the next job), and daemon, so a hung call
    never holds the interpreter's exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[tuple[_Inbox, threading.Thread]] = []

    def reset(self) -> None:
        """In a forked child: the parent's threads are not there."""
        self._lock = threading.Lock()
        self._idle = []

    def submit(self, fn: Callable[[], None]) -> threading.Thread:
        """Run ``fn`` in an idle worker, else in a new one; the worker's thread."""
        with self._lock:
            idle = self._idle.pop() if self._idle else None
        if idle is not None:
            idle[0].put(fn)
            return idle[1]
        inbox: _Inbox = queue.SimpleQueue()
        inbox.put(fn)
        thread = threading.Thread(target=self._loop, args=(inbox,), name="context-compactor-background", daemon=True)
        thread.start()
        return thread

    def _loop(self, inbox: _Inbox) -> None:
        me = threading.current_thread()
        while True:
            fn = inbox.get()
            with contextlib.suppress(Exception):  # a job keeps its own errors: none reach here
                fn()
            with self._lock:
                self._idle.append((inbox, me))


_WORKERS = _Workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WORKERS.reset)


class Job:
    """One background summary of a snapshot (see the module's design note).

    Attributes:
        snap: The snapshot it compacts (the Session's ``_Snapshot``).
        plan: The plan (made in the job unless given).
        result: The compaction of the snapshot, once done (with ``fallback_reason`` set when the
            summarizer failed and the core's driver fell back to the rule summary).
        error: The summarizer's failure: with a ``result``, the one the fallback follows;
            without, the job failed (the Session raises it).
        carried: The late summary it builds on (``previous_summary``), if any.
        early: Started below the soft threshold by the growth forecast: its result is held until
            the compaction is due.
        expect: For an early job, the narrative of the conversation's last LLM summary: when the
            plan applied with it would change nothing (too small a span to repay a summary), the
            job ends without calling the summarizer.
        upgrade: The rule-summary compaction saved over the same snapshot and span (``_Upgrade``):
            the job's LLM summary, when it arrives, replaces that rule summary (a re-apply).
        calls: How many ``prepare()`` calls found it still running.
    """

    def __init__(
        self,
        make_plan: Callable[[], CompactionPlan],
        snap: Any,
        summarizer: Callable[[SummaryRequest], Any] | None,
        config: CompactionConfig,
        *,
        plan: CompactionPlan | None = None,
        carried: str | None = None,
        flushed: int = 0,
        early: bool = False,
        upgrade: Any = None,
        expect: str | None = None,
    ) -> None:
        self.snap = snap
        self.early = early
        self.expect = expect
        self.upgrade = upgrade
        self.calls = 0
        self.plan = plan
        self.carried = carried
        self.result: CompactResult | None = None
        self.error: BaseException | None = None
        self.started = clock()
        #: When it finished (``clock()``), and how many summarizer calls it made.
        self.finished: float | None = None
        self.summarizer_calls = 0
        self._make_plan = make_plan
        self._summarizer = summarizer
        self._config = config
        self._timeout = float(config.summarizer_timeout_s)
        #: The cool-down the core's driver named for a fallback (calls; the Session starts it).
        self.cooldown_calls = 0
        self._flushed = flushed
        self._done = threading.Event()
        self._wake = threading.Event()
        self._cancelled = False
        self._thread: threading.Thread | None = None
        #: Run by :meth:`start_thread` (set before the worker may start it: ``_thread`` is only
        #: known once ``submit`` returns, and an idle worker can run the job before that).
        self._threaded = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The span current where the job was scheduled: its telemetry span's parent.
        self._otel = _otel.scheduled()

    # -- running ---------------------------------------------------------------------------------------

    def _steps(self) -> Generator[tuple[str, Any], Any, CompactResult]:
        """The job's compaction, once for both runners: its plan (made here unless given), then the
        core driver's steps as a foreground compaction takes them (``_driver.steps``: the chunk
        loop, the failure classes, the fallback to the rule summary, the cool-down), without hooks.
        Yields ``("summarize", request)``; the runner sends back the reply or throws the failure in."""
        plan = self.plan if self.plan is not None else self._make_plan()
        self.plan = plan
        if self.early and self.expect:
            small = _too_small(plan, self.expect)
            if small is not None:
                return small
        carried = self.carried
        background = _driver.Background(
            previous=(lambda request: with_previous(request, carried)) if carried else None,
            flushed=self._flushed,
            on_fallback=self._fell_back,
        )
        return (
            yield from _driver.steps(
                plan,
                self.snap.messages,
                system=self.snap.system,
                config=self._config,
                summarizer=self._summarizer,
                on_before_compact=None,
                on_compacted=None,
                state=None,
                background=background,
            )
        )

    def _fell_back(self, error: BaseException | None, cooldown_calls: int) -> None:
        """The core's driver fell back to the rule summary after ``error``: the Session starts the
        cool-down (``cooldown_calls``) when it takes the result."""
        self.error = error if error is not None else SummarizerError("the summarizer failed")
        self.cooldown_calls = cooldown_calls

    def run(self) -> None:
        """Run the job in this thread (``start_thread`` runs it in a new one)."""
        if _otel.TRACER is None:
            self._run()
        else:
            _otel.run_job(self._otel, self, self._run, self._threaded)

    def _run(self) -> None:
        try:
            steps = self._steps()
            deadline = Deadline(self._timeout)
            value: Any = None
            error: BaseException | None = None
            while True:
                request, self.result = _next(steps, value, error)
                if request is None or self._cancelled:
                    break
                self.summarizer_calls += 1
                value, error = None, None
                try:
                    value = call_sync(self._summarizer, request, deadline, self._wake)  # type: ignore[arg-type]
                except Cancelled:
                    break
                except Exception as e:
                    error = e
        except Exception as e:
            self.error, self.result = e, None
        finally:
            self.finished = clock()
            self._done.set()

    async def arun(self) -> None:
        """Run the job in the event loop (its steps, planning and applying, in worker threads)."""
        if _otel.TRACER is None:
            await self._arun()
        else:
            await _otel.arun_job(self._otel, self, self._arun, self._task is not None)

    async def _arun(self) -> None:
        try:
            steps = self._steps()
            deadline = Deadline(self._timeout)
            value: Any = None
            error: BaseException | None = None
            while True:
                request, self.result = await asyncio.to_thread(_next, steps, value, error)
                if request is None or self._cancelled:
                    break
                self.summarizer_calls += 1
                value, error = None, None
                try:
                    value = await call_async(self._summarizer, request, deadline)  # type: ignore[arg-type]
                except Exception as e:
                    error = e
        except asyncio.CancelledError:
            self._cancelled = True
        except Exception as e:
            self.error, self.result = e, None
        finally:
            self.finished = clock()
            self._done.set()

    def start_thread(self) -> None:
        """Run the job in a worker thread (an idle one when there is one: no wait for a new
        thread to start)."""
        self._threaded = True
        self._thread = _WORKERS.submit(self.run)

    def start_task(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self.arun(), name="context-compactor-background")

    # -- state -----------------------------------------------------------------------------------------

    def done(self) -> bool:
        """Finished (successfully, failed or cancelled)."""
        return self._done.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def wait(self, timeout: float | None = None) -> bool:
        """Block until done (a thread job; a task job is awaited with :meth:`await_done`)."""
        return self._done.wait(timeout)

    async def await_done(self, timeout: float | None = None) -> bool:
        if self._task is not None and self._loop is asyncio.get_running_loop():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            return self.done()
        return await asyncio.to_thread(self._done.wait, timeout)

    def cancel(self) -> None:
        """Drop the job: its result is never applied; a thread stops waiting for the summarizer,
        a task is cancelled."""
        self._cancelled = True
        self._wake.set()
        task, loop = self._task, self._loop
        if task is not None and loop is not None and not task.done():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                task.cancel()
            else:
                with contextlib.suppress(RuntimeError):  # the loop is closed: the task is gone with it
                    loop.call_soon_threadsafe(task.cancel)

    def join(self, timeout: float) -> None:
        """Wait for a cancelled thread job to leave (it stops at its next step)."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._done.wait(timeout)  # the worker thread stays, for the next job

    def __repr__(self) -> str:
        state = "cancelled" if self._cancelled else "failed" if self.error else "done" if self.done() else "running"
        kind = ", early" if self.early else ", upgrade" if self.upgrade is not None else ""
        return f"Job({state}{kind}, upto_seq={self.snap.upto_seq}, {clock() - self.started:.2f} s)"
