"""The background-compaction policy of :class:`~context_compactor.session.Session` (a mixin).

What it does and costs is in :mod:`context_compactor._background`'s design note; this module
holds the part that decides, in ``prepare()``/``aprepare()``, when to start a job, apply a finished
one with the delta rule, clear tool output or apply the rule summary at the hard threshold, and
rebase a running job. It is a mixin so that ``session.py`` keeps the Session's storage and API:
the methods here use the Session's in-memory context, lock and helpers (``_refresh``,
``_make_check``, ``_settle``, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from context_compactor import _core
from context_compactor._background import Job
from context_compactor._summarize import classify, describe
from context_compactor.compactor import ContextCompactor
from context_compactor.errors import SummarizerError
from context_compactor.plan import CompactionPlan
from context_compactor.results import CompactionPreview, CompactResult, candidates_of

__all__ = ["BackgroundCompaction", "Job"]

log = logging.getLogger("context_compactor")


class _Retry:
    """The marker of a compaction attempt to run again (another connection compacted first)."""


_RETRY = _Retry()


@dataclass(frozen=True)
class _Snapshot:
    """The context a compaction starts from."""

    messages: list[dict[str, Any]]
    rows: list[int]
    tokens: list[int]
    head: int | None
    upto_seq: int
    system: Any
    #: The compaction covers only the first ``covered`` messages (a background job rebased over a
    #: micro-compaction that cleared tool output meanwhile); the others are kept as they are.
    covered: int | None = None


class BackgroundCompaction:
    """``background=True`` for a Session (mixed into :class:`~context_compactor.session.Session`)."""

    if TYPE_CHECKING:  # provided by Session
        from context_compactor._store import SessionStore
        from context_compactor.compactor import CompactionCheck

        _compactor: ContextCompactor
        _store: SessionStore
        _state: _core.ConversationState
        _job: Job | None
        _carry: str | None
        _rules: ContextCompactor | None
        _msgs: list[dict[str, Any]]
        _rows: list[int]
        _tok: list[int]
        _head: int | None
        _last_seq: int
        _tools: list[Any] | None
        _fmt: str
        _id: str
        system: Any
        last_check: CompactionCheck | None

        def _refresh(self) -> None: ...
        def _make_check(self) -> CompactionCheck: ...
        def _must_answer(self, check: CompactionCheck) -> bool: ...
        def _settle(self, snap: _Snapshot, result: CompactResult) -> CompactResult | _Retry | None: ...

    def _rule_compactor(self) -> ContextCompactor:
        """The compactor without its summarizer: what runs when the agent must not wait."""
        if self._rules is None:
            c = self._compactor
            self._rules = ContextCompactor(c.config, on_before_compact=c.on_before_compact, on_compacted=c.on_compacted)
        return self._rules

    def _snapshot(self) -> _Snapshot:
        """Under the store lock: the context as it is now."""
        return _Snapshot(list(self._msgs), list(self._rows), list(self._tok), self._head, self._last_seq, self.system)

    def _background_steps(self, instructions: str | None) -> Generator[tuple[str, Any], Any, CompactResult | None]:
        """One ``prepare()`` with ``background=True``, for both drivers: yields ``("hook", (fn,
        arg))``, ``("now", None)`` (a compaction with the rule summary, now), ``("run", job)`` (run a
        job in the foreground) and ``("start", job)`` (start it in the background)."""
        c = self._compactor
        applied: CompactResult | None = None
        job = self._job
        if job is not None and job.done():
            self._job = None
            applied = self._finish(job)
            if applied is not None and c.on_compacted is not None:
                yield ("hook", (c.on_compacted, applied))
        with self._store.locked():
            self._refresh()
            check = self._make_check()
            self.last_check = check
            must = self._must_answer(check)
        if must:
            # First what costs no LLM and no summary: clearing old tool output may be enough to
            # get under the hard threshold. A running job is kept (rebased: positions are kept).
            cleared = self._micro_under(self._job)
            if cleared is not None:
                applied = cleared
                if c.on_compacted is not None:
                    yield ("hook", (c.on_compacted, cleared))
                with self._store.locked():
                    check = self._make_check()
                    self.last_check = check
                    must = self._must_answer(check)
        if must:
            # Never wait at the hard threshold: the rule summary now (a top-up over the summary just
            # applied, or while a job runs: that job's summary then feeds the next compaction).
            now: CompactResult | None = yield ("now", None)
            return now if now is not None else applied
        if not check.should_compact:
            if check.micro_due and self._job is None:
                micro: CompactResult | None = yield ("now", None)
                return micro if micro is not None else applied
            return applied
        if self._job is not None or not self._msgs:
            return applied
        with self._store.locked():
            snap = self._snapshot()

        def make_plan() -> CompactionPlan:
            return c.plan(
                snap.messages,
                system=snap.system,
                tools=self._tools,
                format=self._fmt,
                instructions=instructions,
                state=self._state,
            )

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
            float(c.config.summarizer_timeout_s),
            plan=plan,
            carried=self._carry,
            flushed=flushed,
        )
        if forced:
            yield ("run", job)
            done = self._finish(job)
            if done is not None and c.on_compacted is not None:
                yield ("hook", (c.on_compacted, done))
            return done if done is not None else applied
        self._job = job
        yield ("start", job)
        return applied

    def _micro_under(self, job: Job | None) -> CompactResult | None:
        """Micro-compaction now, saved only when it brings the context under the hard threshold.

        While ``job`` runs it must also only edit messages in place (none removed or inserted):
        the job is then rebased onto it, its snapshot's rows becoming the edited copies at the
        same positions, and its summary still applies."""
        cfg = self._compactor.config
        with self._store.locked():
            self._refresh()
            if job is not None and self._head != job.snap.head:
                return None
            snap = self._snapshot()
        result = self._compactor.micro_compact(
            snap.messages, system=snap.system, tools=self._tools, format=self._fmt, state=self._state
        )
        if not result.compacted or result.tokens_after >= min(cfg.hard_threshold, cfg.budget + 1):
            return None
        if job is not None and (
            len(result.origins) != len(snap.messages)
            or any(kind not in ("kept", "edited") or i != pos for pos, (kind, i) in enumerate(result.origins))
        ):
            return None
        done = self._settle(snap, result)
        if done is None or isinstance(done, _Retry):
            return None
        if job is not None:
            with self._store.locked():
                n = len(snap.messages)
                covered = job.snap.covered if job.snap.covered is not None else len(job.snap.messages)
                job.snap = _Snapshot(
                    list(self._msgs[:n]),
                    list(self._rows[:n]),
                    list(self._tok[:n]),
                    self._head,
                    snap.upto_seq,
                    job.snap.system,
                    covered,
                )
        return done

    def _finish(self, job: Job) -> CompactResult | None:
        """Apply a finished job with the delta rule (its failure: the rule summary, cool-down)."""
        if job.cancelled:
            return None
        result = job.result
        if job.error is not None:
            exc = job.error
            cfg = self._compactor.config
            kind = classify(exc)
            if (
                job.plan is None
                or isinstance(exc, SummarizerError)
                or cfg.on_summarizer_error == "raise"
                or (cfg.on_summarizer_error == "fallback" and kind == "permanent")
            ):
                raise SummarizerError(f"the background summarizer failed ({kind}): {describe(exc)}") from exc
            reason = describe(exc)
            log.warning("background summarizer failed (%s, %s); the rule summary applies", kind, reason)
            if cfg.cooldown_calls:
                _core.start_cooldown(self._state, cfg.cooldown_calls)
            result = job.plan.apply(None, fallback_reason=reason)
        if result is None:
            return None
        return self._late(job.snap, result, job.carried)

    def _late(self, snap: _Snapshot, result: CompactResult, carried: str | None) -> CompactResult | None:
        """Save a compaction made on an earlier snapshot; when the context it was made for was
        replaced meanwhile, keep its LLM summary for the next compaction instead."""
        with self._store.locked():
            self._refresh()
            stale = self._head != snap.head
        done = None if stale else self._settle(snap, result)
        if isinstance(done, _Retry):
            done = None
            stale = True
        if stale:
            if result.summary_source == "llm" and result.summary:
                log.info(
                    "session %s: a background summary arrived after a newer compaction; kept for the next", self._id
                )
                self._carry = result.summary
            return None
        if carried is not None and self._carry is carried and result.summary_source == "llm":
            self._carry = None
        return done

    def _cancel_job(self) -> None:
        job, self._job = self._job, None
        if job is not None:
            job.cancel()
