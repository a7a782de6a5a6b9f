"""OpenTelemetry spans, events and a metric for each compaction (the ``[otel]`` extra).

Only ``opentelemetry-api`` is used; the application configures the SDK (or not). The import is
tried once, here: without the API every hook is a module-attribute test (``TRACER is None``) in
the caller. With the API and no SDK configured the tracer hands back a non-recording span, and
nothing else is computed (``span.is_recording()`` is read before any attribute is built).

What a span carries is in ``docs/telemetry.md``; the names are the constants below.

- ``context_compactor.compact``: one span per compaction (``ContextCompactor.compact``,
  ``acompact``, a ``Session``'s foreground compactions, a background job, each conversation of
  ``compact_many``/``acompact_many``).
  Its parent is the span current when the compaction was called; a background job's span is a
  *child* of the span current when the job was scheduled (the ``prepare()`` call that started
  it), so it stays in the same trace even though it ends after that span did.
- ``gen_ai.conversation.compacted = true`` (OpenTelemetry GenAI semantic conventions; only
  ``true`` is ever set) on the caller's current span when a compaction changed the conversation:
  the conventions put it on the inference span whose input was compacted, which the library
  never sees; the caller's span (the agent step that compacts, then calls the model) is the
  nearest one it does see.
- ``context_compactor.compact_many``: one span per ``compact_many``/``acompact_many`` call, the
  parent of its conversations' ``context_compactor.compact`` spans (each with its index in the
  batch). A batch sets no ``gen_ai.conversation.compacted``: no one inference span follows it.
- ``context_compactor.tokens.saved``: a counter of the tokens compactions removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from context_compactor import _core
from context_compactor.results import CompactResult
from context_compactor.tokens import TokenCounter

if TYPE_CHECKING:
    from context_compactor.compactor import ContextCompactor

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace

    AVAILABLE = True
except ImportError:
    AVAILABLE = False

__all__ = [
    "AVAILABLE",
    "BATCH_SPAN_NAME",
    "COMPACTED",
    "CONVERSATION_ID",
    "METER_NAME",
    "SPAN_NAME",
    "TOKENS_SAVED",
    "TRACER_NAME",
    "ledger_sizes",
]

log = logging.getLogger("context_compactor")

TRACER_NAME = "context_compactor"
METER_NAME = "context_compactor"
#: The span of one compaction.
SPAN_NAME = "context_compactor.compact"
#: The span of one ``compact_many``/``acompact_many`` call: its conversations' spans' parent.
BATCH_SPAN_NAME = "context_compactor.compact_many"
#: The GenAI semantic conventions' flag, set (``true`` only) on the caller's current span.
COMPACTED = "gen_ai.conversation.compacted"
#: The GenAI semantic conventions' conversation id: a ``Session``'s id, on its compactions' spans.
CONVERSATION_ID = "gen_ai.conversation.id"
#: The counter of tokens removed by compactions (``tokens_before - tokens_after``, when positive).
TOKENS_SAVED = "context_compactor.tokens.saved"

_P = "context_compactor."


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("context-compactor")
    except Exception:  # an uninstalled checkout
        return ""


#: The tracer (``None`` without the API: the compactor then skips every hook).
TRACER: Any = None
_COUNTER: Any = None
if AVAILABLE:
    TRACER = otel_trace.get_tracer(TRACER_NAME, _version() or None)
    _COUNTER = otel_metrics.get_meter(METER_NAME, _version()).create_counter(
        TOKENS_SAVED, unit="{token}", description="Tokens removed from conversations by compaction"
    )


# -- the ledger -------------------------------------------------------------------------------------

_SENTINEL = _core.LEDGER_SENTINEL
_SECTIONS = {
    "The user's words (verbatim, oldest first):": "user_words",
    "用户的原话（逐字，按时间顺序）：": "user_words",
    "Preserved details:": "details",
    "保留的细节：": "details",
    "Artifact trail:": "trail",
    "文件变更记录：": "trail",
}
_ENTRY = {"user_words": "> ", "details": "- ", "trail": "- "}


def ledger_sizes(summary: str, count: Callable[[str], int]) -> dict[str, tuple[int, int]]:
    """The ledger's sections in a summary's text (``src/summary/ledger.rs`` writes them): section
    name (``user_words``, ``details``, ``trail``) -> (entries, tokens of the section as written,
    its header included). An entry of ``user_words`` is a line: the kept sentences of one user
    message. ``{}`` when the summary has no ledger."""
    lines = summary.splitlines()
    try:
        at = next(i for i, line in enumerate(lines) if line.strip() == _SENTINEL)
    except StopIteration:
        return {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    name = ""
    for line in lines[at + 1 :]:
        t = line.rstrip()
        if t in _SECTIONS:
            name = _SECTIONS[t]
            current = sections.setdefault(name, [])
            current.append(t)
        elif current is not None and t.startswith(_ENTRY[name]):
            current.append(t)
    return {k: (len(v) - 1, count("\n".join(v))) for k, v in sections.items()}


# -- what a span records ----------------------------------------------------------------------------


def _source(result: CompactResult) -> tuple[str, str | None]:
    s = result.summary_source
    if s is None:
        return "none", None
    if s.startswith("provider:"):
        return "provider", s.split(":", 1)[1]
    return s, None


def _prefix(result: CompactResult, system_summary: bool) -> int:
    """How many leading messages the provider's cached prefix keeps (the same objects, in place)."""
    if system_summary and result.summary is not None:
        return 0
    n = 0
    for k, origin in enumerate(result.origins):
        if origin != ("kept", k):
            break
        n += 1
    return n


Steps = Generator[tuple[str, Any], Any, CompactResult]


class _Recorder:
    """One recording span: watches the compaction's steps for the summarizer calls, then writes
    the result's attributes and the phase events (seed 004's meta events) at the end."""

    __slots__ = ("calls", "conversation", "failures", "planned", "span", "summary_done", "summary_start", "trigger")

    def __init__(self, span: Any, trigger: str, conversation: str | None) -> None:
        self.span = span
        self.trigger = trigger
        self.conversation = conversation
        self.planned: int | None = None
        self.summary_start: int | None = None
        self.summary_done: int | None = None
        self.failures: list[tuple[int, str]] = []
        self.calls = 0

    def watch(self, steps: Steps) -> Steps:
        """``steps`` as they are, noting when planning ended and each summarizer call's start and end."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                item = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            now = time.time_ns()
            if self.planned is None:
                self.planned = now
            kind = item[0]
            if kind == "summarize":
                self.calls += 1
                if self.summary_start is None:
                    self.summary_start = now
            value, error = None, None
            try:
                value = yield item
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as e:
                error = e
            if kind == "summarize":
                self.summary_done = time.time_ns()
                if error is not None:
                    self.failures.append((self.summary_done, type(error).__qualname__))

    def finish(self, result: CompactResult | None, count: Callable[[str], int] | None, system_summary: bool) -> None:
        try:
            self._finish(result, count, system_summary)
        except Exception:  # telemetry never fails a compaction
            log.debug("telemetry: could not record the compaction's attributes", exc_info=True)

    def _finish(self, result: CompactResult | None, count: Callable[[str], int] | None, system_summary: bool) -> None:
        span = self.span
        attrs: dict[str, Any] = {_P + "trigger": self.trigger}
        if self.conversation is not None:
            attrs[CONVERSATION_ID] = self.conversation
        if self.calls:
            attrs[_P + "summary.calls"] = self.calls
        if result is None:  # raised, or a background job that failed or was cancelled
            span.set_attributes(attrs)
            if self.summary_start is not None:
                span.add_event("summary_start", None, self.summary_start)
            for at, error in self.failures:
                span.add_event("summary_failed", {"error.type": error}, at)
            return
        source, provider = _source(result)
        prefix = _prefix(result, system_summary)
        attrs.update(
            {
                _P + "strategy": result.strategy,
                _P + "summary.source": source,
                _P + "tokens.before": result.tokens_before,
                _P + "tokens.after": result.tokens_after,
                _P + "tokens.saved": result.saved_tokens,
                _P + "messages.before": result.original_count,
                _P + "messages.after": len(result.messages),
                _P + "over_budget": result.over_budget,
                _P + "cache.prefix_messages": prefix,
                _P + "cache.prefix_broken": result.changed and prefix < result.original_count,
            }
        )
        if provider is not None:
            attrs[_P + "summary.provider"] = provider
        if result.fallback_reason is not None:
            attrs[_P + "fallback.reason"] = result.fallback_reason
        if result.over_budget_reason is not None:
            attrs[_P + "over_budget.reason"] = result.over_budget_reason
        if result.reason is not None:
            attrs[_P + "reason"] = result.reason
        if result.summary is not None and count is not None:
            for name, (entries, tokens) in ledger_sizes(result.summary, count).items():
                attrs[f"{_P}ledger.{name}.entries"] = entries
                attrs[f"{_P}ledger.{name}.tokens"] = tokens
        span.set_attributes(attrs)
        self._events(result, source)

    def _events(self, result: CompactResult, source: str) -> None:
        end = time.time_ns()
        planned = self.planned or end
        before = result.tokens_before
        add = self.span.add_event
        failures = iter(self.failures)
        for phase, after in result.phases:
            tokens = {"tokens_before": before, "tokens_after": after}
            if phase in ("summary", "rule_summary"):
                add("summary_start", {"tokens_before": before}, self.summary_start or end)
                for at, error in failures:
                    add("summary_failed", {"error.type": error}, at)
                done = {**tokens, "summary.source": source}
                if result.fallback_reason is not None:
                    done["fallback.reason"] = result.fallback_reason
                add("summary_done", done, (self.summary_done or end) if source != "rule" else end)
            else:
                add(phase, tokens, planned if phase in ("repair", "micro", "selective") else end)
            before = after
        for at, error in failures:  # a failed call with no summary phase after it
            add("summary_failed", {"error.type": error}, at)


def _count(result: CompactResult | None) -> None:
    """The tokens-saved metric, for a compaction that changed the conversation."""
    if result is not None and result.compacted and result.saved_tokens > 0:
        attrs = {_P + "strategy": result.strategy, _P + "summary.source": _source(result)[0]}
        _COUNTER.add(result.saved_tokens, attrs)


def _mark(result: CompactResult | None) -> None:
    """``gen_ai.conversation.compacted = true`` on the current span (the caller's: the compaction's
    own has ended) and the metric, for a compaction that changed the conversation."""
    if result is None or not result.compacted:
        return
    caller = otel_trace.get_current_span()
    if caller.is_recording():
        caller.set_attribute(COMPACTED, True)
    _count(result)


def _counter_of(compactor: ContextCompactor) -> tuple[Callable[[str], int], bool]:
    return compactor.counter.count, compactor.config.summary_role == "system"


# -- the hooks ----------------------------------------------------------------------------------------


def compact(
    compactor: ContextCompactor, drive: Callable[[Steps], CompactResult], steps: Steps, force: bool
) -> CompactResult:
    """``drive(steps)`` in a ``context_compactor.compact`` span (``TRACER`` is set)."""
    span = TRACER.start_span(SPAN_NAME)
    if not span.is_recording():
        result = drive(steps)
        _mark(result)
        return result
    rec = _Recorder(span, "manual" if force else "auto", _CONVERSATION.get())
    with otel_trace.use_span(span, end_on_exit=True):
        try:
            result = drive(rec.watch(steps))
        except BaseException:
            rec.finish(None, None, False)
            raise
        rec.finish(result, *_counter_of(compactor))
    _mark(result)
    return result


async def acompact(
    compactor: ContextCompactor, drive: Callable[[Steps], Awaitable[CompactResult]], steps: Steps, force: bool
) -> CompactResult:
    """:func:`compact` for ``acompact``."""
    span = TRACER.start_span(SPAN_NAME)
    if not span.is_recording():
        result = await drive(steps)
        _mark(result)
        return result
    rec = _Recorder(span, "manual" if force else "auto", _CONVERSATION.get())
    with otel_trace.use_span(span, end_on_exit=True):
        try:
            result = await drive(rec.watch(steps))
        except BaseException:
            rec.finish(None, None, False)
            raise
        rec.finish(result, *_counter_of(compactor))
    _mark(result)
    return result


def mark(result: CompactResult | None, counted: Any = None) -> CompactResult | None:
    """``gen_ai.conversation.compacted`` on the current span and the metric when ``result``
    compacted: a ``Session`` applying a background job's result (``counted``: a foreground
    result of the same call, which ``compact()`` already recorded)."""
    if TRACER is not None and result is not None and result is not counted:
        _mark(result)
    return result


# The Session whose prepare() is running (its id), for the spans of the compactions it runs.
_CONVERSATION: ContextVar[str | None] = ContextVar("context_compactor_conversation", default=None)


def enter(conversation: str) -> Any:
    """A ``Session``'s ``prepare()`` starts: its compactions' spans get ``gen_ai.conversation.id``.
    Hand what it returns to :func:`leave`."""
    return _CONVERSATION.set(conversation) if TRACER is not None else None


def leave(token: Any) -> None:
    if token is not None:
        _CONVERSATION.reset(token)


def scheduled() -> Any:
    """Where a background job is scheduled: the context (its span's parent) and the Session's id;
    ``None`` without the API."""
    return (otel_context.get_current(), _CONVERSATION.get()) if TRACER is not None else None


def _job_span(parent: Any, background: bool) -> tuple[Any, _Recorder] | None:
    span = TRACER.start_span(SPAN_NAME, context=parent[0])
    if not span.is_recording():
        return None
    return span, _Recorder(span, "background" if background else "auto", parent[1])


def _job_end(span: Any, rec: _Recorder, job: Any) -> None:
    try:
        if job.cancelled:
            span.set_attribute(_P + "cancelled", True)
        if job.error is not None:
            span.record_exception(job.error)
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, type(job.error).__qualname__))
        plan = job.plan
        count = TokenCounter(plan._tokenizer).count if plan is not None else None
        rec.finish(job.result, count, False)
    finally:
        span.end()


def run_job(parent: Any, job: Any, body: Callable[[], None], background: bool) -> None:
    """A background job's ``run`` in a span, child of the span current where it was scheduled
    (``parent``: :func:`scheduled`)."""
    opened = _job_span(parent, background)
    if opened is None:
        body()
        return
    span, rec = opened
    token = otel_context.attach(otel_trace.set_span_in_context(span, parent[0]))
    try:
        body()
    finally:
        otel_context.detach(token)
        _job_end(span, rec, job)


async def arun_job(parent: Any, job: Any, body: Callable[[], Awaitable[None]], background: bool) -> None:
    """:func:`run_job` for ``arun``."""
    opened = _job_span(parent, background)
    if opened is None:
        await body()
        return
    span, rec = opened
    token = otel_context.attach(otel_trace.set_span_in_context(span, parent[0]))
    try:
        await body()
    finally:
        otel_context.detach(token)
        _job_end(span, rec, job)


# -- compact_many -------------------------------------------------------------------------------------


class Batch:
    """The span of one ``compact_many``/``acompact_many`` call (``TRACER`` is set) and its
    conversations' spans, children of it whichever thread or task runs them."""

    __slots__ = ("compactor", "context", "recording", "span", "spanned", "trigger")

    def __init__(self, span: Any, compactor: ContextCompactor, force: bool) -> None:
        self.span = span
        self.compactor = compactor
        self.trigger = "manual" if force else "auto"
        self.recording: bool = span.is_recording()
        self.context = otel_trace.set_span_in_context(span)
        self.spanned: set[int] = set()

    def _open(self, index: int, start: int | None = None) -> tuple[Any, _Recorder]:
        self.spanned.add(index)
        span = TRACER.start_span(SPAN_NAME, context=self.context, start_time=start)
        span.set_attribute(_P + "batch.index", index)
        return span, _Recorder(span, self.trigger, None)

    def drive(self, index: int, drive: Callable[[Steps], CompactResult], steps: Steps) -> CompactResult:
        """Conversation ``index`` through ``drive(steps)`` in its own span."""
        if not self.recording:
            self.spanned.add(index)
            result = drive(steps)
            _count(result)
            return result
        span, rec = self._open(index)
        with otel_trace.use_span(span, end_on_exit=True):
            try:
                result = drive(rec.watch(steps))
            except BaseException:
                rec.finish(None, None, False)
                raise
            rec.finish(result, *_counter_of(self.compactor))
        _count(result)
        return result

    async def adrive(
        self, index: int, drive: Callable[[Steps], Awaitable[CompactResult]], steps: Steps
    ) -> CompactResult:
        """:meth:`drive` for ``acompact_many``."""
        if not self.recording:
            self.spanned.add(index)
            result = await drive(steps)
            _count(result)
            return result
        span, rec = self._open(index)
        with otel_trace.use_span(span, end_on_exit=True):
            try:
                result = await drive(rec.watch(steps))
            except BaseException:
                rec.finish(None, None, False)
                raise
            rec.finish(result, *_counter_of(self.compactor))
        _count(result)
        return result

    def done(self, results: list[Any], start: int) -> None:
        """The conversations that ran without steps (the pool's rule summaries, a failure before
        any step): their tokens counted, a span each, from ``start`` (ns), written now; then the
        batch's attributes. (``spanned``: the conversations :meth:`drive` ran and counted.)"""
        try:
            self._done(results, start)
        except Exception:  # telemetry never fails a compaction
            log.debug("telemetry: could not record the batch", exc_info=True)

    def _done(self, results: list[Any], start: int) -> None:
        for i, r in enumerate(results):
            if isinstance(r, CompactResult) and i not in self.spanned:
                _count(r)
        if not self.recording:
            return
        count = _counter_of(self.compactor)
        for i, r in enumerate(results):
            if i in self.spanned:
                continue
            span, rec = self._open(i, start)
            if isinstance(r, BaseException):
                span.record_exception(r)
                span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, type(r).__qualname__))
                rec.finish(None, None, False)
            else:
                rec.finish(r, *count)
            span.end()
        failed = sum(isinstance(r, BaseException) for r in results)
        ok = [r for r in results if isinstance(r, CompactResult)]
        self.span.set_attributes(
            {
                _P + "batch.conversations": len(results),
                _P + "batch.failed": failed,
                _P + "batch.compacted": sum(r.compacted for r in ok),
                _P + "tokens.before": sum(r.tokens_before for r in ok),
                _P + "tokens.after": sum(r.tokens_after for r in ok),
                _P + "tokens.saved": sum(r.saved_tokens for r in ok),
            }
        )


@contextmanager
def batch(compactor: ContextCompactor, force: bool) -> Iterator[Batch]:
    """A ``compact_many``/``acompact_many`` call in its span (``TRACER`` is set): the span is
    current in the caller while the batch runs; an exception (``BatchError``) ends it with status
    ``ERROR``."""
    span = TRACER.start_span(BATCH_SPAN_NAME)
    if span.is_recording():
        span.set_attribute(_P + "trigger", "manual" if force else "auto")
    with otel_trace.use_span(span, end_on_exit=True):
        yield Batch(span, compactor, force)
