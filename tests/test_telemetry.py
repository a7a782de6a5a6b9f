"""OpenTelemetry (``context_compactor.telemetry``): what an operator's backend receives, read from
the SDK's in-memory exporters — the span's name, attributes and phase events for a micro, a rule,
an LLM and a fallback compaction (sync, async, a Session, a background job), the flag on the
caller's span, the tokens-saved counter; and nothing computed without an SDK or without the API.

The tests use their own TracerProvider and MeterProvider (patched into the module), not the
global ones: the rest of the suite runs without telemetry.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _messages import conversation
from context_compactor import ContextCompactor, SummarizerError, telemetry
from context_compactor.session import Session

P = "context_compactor."
SUMMARY = "<summary>Fixed the rounding in /srv/app/billing/tax.py; the test passes now.</summary>"


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("test")
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.library_tracer = provider.get_tracer(telemetry.TRACER_NAME)

    def spans(self, name: str = telemetry.SPAN_NAME) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def one(self) -> ReadableSpan:
        spans = self.spans()
        assert len(spans) == 1, [s.name for s in self.exporter.get_finished_spans()]
        return spans[0]

    def saved(self) -> int:
        data = self.reader.get_metrics_data()
        total = 0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == telemetry.TOKENS_SAVED:
                        total += sum(p.value for p in metric.data.data_points)
        return total


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[Otel]:
    o = Otel()
    monkeypatch.setattr(telemetry, "TRACER", o.library_tracer)
    counter = o.meter_provider.get_meter(telemetry.METER_NAME).create_counter(telemetry.TOKENS_SAVED, unit="{token}")
    monkeypatch.setattr(telemetry, "_COUNTER", counter)
    yield o
    o.meter_provider.shutdown()


def events(span: ReadableSpan) -> list[str]:
    return [e.name for e in span.events]


def event(span: ReadableSpan, name: str) -> dict[str, Any]:
    found = [dict(e.attributes or {}) for e in span.events if e.name == name]
    assert len(found) == 1, events(span)
    return found[0]


def with_user_turns(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``msgs`` with a user message after every tenth tool result: the ledger keeps their words."""
    out = []
    for i, m in enumerate(msgs):
        out.append(m)
        if m["role"] == "tool" and i % 10 == 3:
            out.append({"role": "user", "content": f"Keep the API of tax.round_total(). Look at docs/spec{i}.md too."})
    return out


def small(**kw: Any) -> ContextCompactor:
    kw.setdefault("max_context_tokens", 12_000)
    kw.setdefault("reserve_tokens", 1_000)
    return ContextCompactor(**kw)


def test_a_rule_compaction_span_carries_the_result_and_its_phases(otel: Otel) -> None:
    msgs = with_user_turns(conversation(30))
    with otel.tracer.start_as_current_span("agent step") as step:
        result = small().compact(msgs, force=True)
    span = otel.one()
    a = dict(span.attributes or {})
    assert result.strategy == "rule_summary"
    assert a[P + "trigger"] == "manual" and telemetry.CONVERSATION_ID not in a  # no Session
    assert a[P + "strategy"] == "rule_summary"
    assert a[P + "summary.source"] == "rule"
    assert P + "fallback.reason" not in a and P + "summary.calls" not in a
    assert (a[P + "tokens.before"], a[P + "tokens.after"]) == (result.tokens_before, result.tokens_after)
    assert a[P + "tokens.saved"] == result.tokens_before - result.tokens_after > 0
    assert (a[P + "messages.before"], a[P + "messages.after"]) == (len(msgs), len(result.messages))
    assert a[P + "over_budget"] is False
    # The system prompt and the task are kept in place; the summary follows them.
    assert a[P + "cache.prefix_messages"] == 2 and a[P + "cache.prefix_broken"] is True
    # The ledger carries the user's words: a line for each of the six replaced user messages.
    assert result.summary is not None and result.summary.count("\n> ") == 6
    assert a[P + "ledger.user_words.entries"] == 6 and a[P + "ledger.user_words.tokens"] > 6 * 5
    names = events(span)
    assert names.index("summary_start") < names.index("summary_done")
    done = event(span, "summary_done")
    assert done["summary.source"] == "rule" and done["tokens_after"] == result.tokens_after
    assert event(span, "summary_start")["tokens_before"] == done["tokens_before"]
    # The caller's span is the compaction's parent and gets the GenAI flag.
    assert span.parent is not None and span.parent.span_id == step.get_span_context().span_id
    assert step.attributes is not None and step.attributes[telemetry.COMPACTED] is True
    assert otel.saved() == result.saved_tokens


def test_a_micro_compaction_has_a_micro_event_and_no_summary(otel: Otel) -> None:
    msgs = conversation(30)
    c = small(max_context_tokens=40_000, clear_at_least_tokens=0, micro_min_gain_ratio=0)
    check = c.check(msgs)
    assert check.micro_due and check.urgency == "none"
    result = c.compact(msgs)
    assert result.strategy == "micro"
    span = otel.one()
    a = dict(span.attributes or {})
    assert a[P + "trigger"] == "auto" and a[P + "strategy"] == "micro" and a[P + "summary.source"] == "none"
    assert not any(k.startswith(P + "ledger.") for k in a)
    micro = event(span, "micro")
    assert micro["tokens_before"] == result.tokens_before and micro["tokens_after"] == result.tokens_after
    assert "summary_start" not in events(span)
    # Cleared tool output breaks the cached prefix at the first cleared result.
    first_edit = next(k for k, o in enumerate(result.origins) if o[0] != "kept")
    assert a[P + "cache.prefix_messages"] == first_edit and a[P + "cache.prefix_broken"] is True
    assert otel.saved() == result.saved_tokens > 0


def test_nothing_to_do_is_a_span_without_the_flag(otel: Otel) -> None:
    msgs = conversation(2)
    with otel.tracer.start_as_current_span("agent step") as step:
        result = small().compact(msgs)
    assert result.strategy == "none"
    a = dict(otel.one().attributes or {})
    assert a[P + "strategy"] == "none" and a[P + "cache.prefix_broken"] is False
    assert a[P + "tokens.saved"] == 0
    # The conventions set the flag to true only, never false.
    assert telemetry.COMPACTED not in (step.attributes or {})
    assert otel.saved() == 0


def test_an_llm_compaction_times_the_summarizer_and_parents_its_spans(otel: Otel) -> None:
    calls = []

    def summarizer(request: Any) -> str:
        calls.append(request.chunk)
        with otel.tracer.start_as_current_span("chat summary-model"):
            return SUMMARY

    result = small(summarizer=summarizer).compact(conversation(30))
    assert result.summary_source == "llm"
    span = otel.one()
    a = dict(span.attributes or {})
    assert a[P + "trigger"] == "auto" and a[P + "strategy"] == "summary" and a[P + "summary.source"] == "llm"
    # The span is summarised in chunks: one call each.
    assert len(calls) > 1 and a[P + "summary.calls"] == len(calls)
    chats = otel.spans("chat summary-model")
    assert len(chats) == len(calls)
    assert all(c.parent is not None and c.parent.span_id == span.context.span_id for c in chats)
    start, done = (next(e for e in span.events if e.name == n) for n in ("summary_start", "summary_done"))
    assert all(c.start_time is not None and c.end_time is not None for c in chats)
    assert start.timestamp <= min(c.start_time for c in chats)  # type: ignore[type-var]
    assert max(c.end_time for c in chats) <= done.timestamp  # type: ignore[type-var]
    assert dict(done.attributes or {})["summary.source"] == "llm"
    assert a[P + "tokens.after"] == result.tokens_after


def test_a_fallback_records_the_failed_call_and_the_reason(otel: Otel) -> None:
    def summarizer(request: Any) -> str:
        raise TimeoutError("the summary model timed out")

    result = small(summarizer=summarizer).compact(conversation(30))
    assert result.summary_source == "rule" and result.fallback_reason
    span = otel.one()
    a = dict(span.attributes or {})
    assert a[P + "summary.source"] == "rule" and a[P + "fallback.reason"] == result.fallback_reason
    assert "timed out" in a[P + "fallback.reason"]
    names = events(span)
    assert names.index("summary_start") < names.index("summary_failed") < names.index("summary_done")
    assert event(span, "summary_failed")["error.type"] == "TimeoutError"
    assert event(span, "summary_done")["fallback.reason"] == result.fallback_reason
    assert span.status.is_ok


def test_a_raised_summarizer_error_ends_the_span_as_an_error(otel: Otel) -> None:
    def summarizer(request: Any) -> str:
        raise ValueError("bad request: the model name is wrong")

    with pytest.raises(SummarizerError):
        small(summarizer=summarizer, on_summarizer_error="raise").compact(conversation(30))
    span = otel.one()
    assert span.status.status_code == otel_trace.StatusCode.ERROR
    assert "exception" in events(span) and "summary_failed" in events(span)


def test_acompact_records_the_same_span(otel: Otel) -> None:
    async def summarizer(request: Any) -> str:
        with otel.tracer.start_as_current_span("chat summary-model"):
            await asyncio.sleep(0)
            return SUMMARY

    async def main() -> Any:
        with otel.tracer.start_as_current_span("agent step") as step:
            result = await small(summarizer=summarizer).acompact(conversation(30), force=True)
        return result, step

    result, step = asyncio.run(main())
    span = otel.one()
    a = dict(span.attributes or {})
    assert a[P + "trigger"] == "manual" and a[P + "summary.source"] == "llm"
    assert a[P + "tokens.after"] == result.tokens_after
    chats = otel.spans("chat summary-model")
    assert chats and all(c.parent is not None and c.parent.span_id == span.context.span_id for c in chats)
    assert step.attributes is not None and step.attributes[telemetry.COMPACTED] is True


def test_a_session_compaction_is_traced_under_prepare(otel: Otel) -> None:
    s = Session(compactor=small(), store=":memory:")
    s.extend(conversation(30))
    with otel.tracer.start_as_current_span("agent step") as step:
        result = s.prepare()
    assert result is not None and result.compacted
    a = dict(otel.one().attributes or {})
    assert a[P + "trigger"] == "auto" and a[P + "strategy"] == result.strategy
    assert a[telemetry.CONVERSATION_ID] == s.id
    assert step.attributes is not None and step.attributes[telemetry.COMPACTED] is True
    assert otel.saved() == result.saved_tokens
    s.close()


def background_session(summarizer: Any) -> Session:
    """A background Session at its soft threshold."""
    c = ContextCompactor(
        max_context_tokens=3000, reserve_tokens=300, summarizer=summarizer, background=True, summarizer_timeout_s=20
    )
    s = Session(compactor=c, store=":memory:")
    s.append({"role": "system", "content": "You are a coding agent."})
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    i = 0
    while s.check().urgency == "none":
        s.extend(
            [
                {"role": "assistant", "content": f"Step {i}: read /srv/app/mod{i}.py. " + "Looked at it. " * 12},
                {"role": "user", "content": f"Go on with step {i + 1}."},
            ]
        )
        i += 1
    return s


def test_a_background_job_span_is_a_child_of_the_prepare_that_started_it(otel: Otel) -> None:
    release = threading.Event()

    def summarizer(request: Any) -> str:
        assert release.wait(10)
        return SUMMARY

    s = background_session(summarizer)
    with otel.tracer.start_as_current_span("scheduling step") as scheduling:
        assert s.prepare() is None
    job = s.pending
    assert job is not None
    release.set()
    assert job.wait(10)
    (span,) = otel.spans()
    assert span.parent is not None and span.parent.span_id == scheduling.get_span_context().span_id
    assert span.context.trace_id == scheduling.get_span_context().trace_id
    a = dict(span.attributes or {})
    assert a[P + "trigger"] == "background" and a[P + "summary.source"] == "llm"
    assert a[telemetry.CONVERSATION_ID] == s.id
    assert "summary_done" in events(span)
    # The prepare() that applies the job's result marks its caller's span and counts the tokens.
    with otel.tracer.start_as_current_span("applying step") as applying:
        result = s.prepare()
    assert result is not None and result.summary_source == "llm"
    assert applying.attributes is not None and applying.attributes[telemetry.COMPACTED] is True
    assert otel.saved() == result.saved_tokens > 0
    s.close()


def test_an_asyncio_background_task_and_aprepare_are_traced_the_same_way(otel: Otel) -> None:
    async def summarizer(request: Any) -> str:
        with otel.tracer.start_as_current_span("chat summary-model"):
            await asyncio.sleep(0.01)
            return SUMMARY

    async def main() -> tuple[Any, Any, Any]:
        s = background_session(summarizer)
        with otel.tracer.start_as_current_span("scheduling step") as scheduling:
            assert await s.aprepare() is None
        job = s.pending
        assert job is not None and await job.await_done(10)
        with otel.tracer.start_as_current_span("applying step") as applying:
            result = await s.aprepare()
        s.close()
        return scheduling, applying, result, s.id

    scheduling, applying, result, sid = asyncio.run(main())
    (span,) = otel.spans()
    assert span.parent is not None and span.parent.span_id == scheduling.get_span_context().span_id
    a = dict(span.attributes or {})
    assert a[P + "trigger"] == "background" and a[P + "summary.source"] == "llm"
    assert a[telemetry.CONVERSATION_ID] == sid
    chats = otel.spans("chat summary-model")
    assert chats and all(c.parent is not None and c.parent.span_id == span.context.span_id for c in chats)
    assert result is not None and result.summary_source == "llm"
    assert applying.attributes is not None and applying.attributes[telemetry.COMPACTED] is True
    assert otel.saved() == result.saved_tokens > 0


def test_without_an_sdk_no_attribute_is_computed(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    # The API's own default: a tracer whose spans do not record (no SDK configured).
    monkeypatch.setattr(telemetry, "TRACER", otel_trace.NoOpTracer())

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a non-recording span computed attributes")

    monkeypatch.setattr(telemetry, "_Recorder", fail)
    monkeypatch.setattr(telemetry, "ledger_sizes", fail)
    result = small().compact(conversation(30), force=True)
    assert result.compacted and otel.exporter.get_finished_spans() == ()


def test_ledger_sizes_reads_both_languages() -> None:
    en = (
        "[context-compactor summary] …\n\nnarrative\n\n[context-compactor ledger v1]\n"
        "The user's words (verbatim, oldest first):\n> Fix it. Keep the API.\n> Thanks.\n"
        "Preserved details:\n- docs/spec.md\nArtifact trail:\n- src/a.py: edited\n- src/b.py: created"
    )
    sizes = telemetry.ledger_sizes(en, len)
    assert {k: v[0] for k, v in sizes.items()} == {"user_words": 2, "details": 1, "trail": 2}
    assert sizes["details"][1] == len("Preserved details:\n- docs/spec.md")
    zh = (
        "叙述\n[context-compactor ledger v1]\n用户的原话（逐字，按时间顺序）：\n> 修复这个测试。不要改公共接口。\n"
        "文件变更记录：\n- src/税.py: edited"
    )
    assert {k: v[0] for k, v in telemetry.ledger_sizes(zh, len).items()} == {"user_words": 1, "trail": 1}
    assert telemetry.ledger_sizes("no ledger here\n- a line", len) == {}


def test_without_the_api_the_hooks_are_skipped() -> None:
    # A fresh interpreter where `import opentelemetry` fails, as when the package is absent.
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from context_compactor import ContextCompactor, telemetry\n"
        "assert telemetry.AVAILABLE is False and telemetry.TRACER is None\n"
        "msgs = [{'role': 'user', 'content': 'x ' * 4000}, {'role': 'assistant', 'content': 'ok'}] * 4\n"
        "r = ContextCompactor(max_context_tokens=6000, reserve_tokens=500).compact(msgs, force=True)\n"
        "assert r.compacted, r\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# -- compact_many ----------------------------------------------------------------------------------


def batch_spans(otel: Otel) -> tuple[ReadableSpan, dict[int, ReadableSpan]]:
    """The batch's span and its conversations' spans by index (each a child of the batch's)."""
    (parent,) = otel.spans(telemetry.BATCH_SPAN_NAME)
    children: dict[int, ReadableSpan] = {}
    for s in otel.spans():
        assert s.parent is not None and s.parent.span_id == parent.context.span_id
        assert s.context.trace_id == parent.context.trace_id
        children[int((s.attributes or {})[P + "batch.index"])] = s
    return parent, children


def test_compact_many_has_a_span_per_conversation_under_the_batch_span(otel: Otel) -> None:
    # The rule summary only: the pool plans and finishes every conversation, no Python step runs.
    batch = [with_user_turns(conversation(30)), conversation(2), "not a conversation", conversation(40)]
    with otel.tracer.start_as_current_span("nightly eval") as caller:
        results = small().compact_many(batch, force=True, return_exceptions=True)
    parent, children = batch_spans(otel)
    assert parent.parent is not None and parent.parent.span_id == caller.get_span_context().span_id
    assert sorted(children) == [0, 1, 2, 3]
    for i, r in enumerate(results):
        a = dict(children[i].attributes or {})
        assert a[P + "trigger"] == "manual"
        if isinstance(r, BaseException):
            # The bad item: an error span naming the exception, and no result attributes.
            assert children[i].status.status_code == otel_trace.StatusCode.ERROR
            assert events(children[i]) == ["exception"] and P + "strategy" not in a
            assert dict(children[i].events[0].attributes or {})["exception.type"].endswith("MessageTypeError")
            continue
        assert a[P + "strategy"] == r.strategy and a[P + "tokens.after"] == r.tokens_after
        assert (a[P + "messages.before"], a[P + "messages.after"]) == (r.original_count, len(r.messages))
        if r.strategy == "rule_summary":
            assert "summary_done" in events(children[i]) and a[P + "summary.source"] == "rule"
    assert [type(r).__name__ for r in results] == ["CompactResult"] * 2 + ["MessageTypeError", "CompactResult"]
    assert results[0].summary is not None and results[0].summary.count("\n> ") == 6  # type: ignore[union-attr]
    assert dict(children[0].attributes or {})[P + "ledger.user_words.entries"] == 6
    ok = [r for r in results if not isinstance(r, BaseException)]
    b = dict(parent.attributes or {})
    # The two-turn conversation has nothing to compact, even forced.
    assert [r.compacted for r in ok] == [True, False, True]
    assert (b[P + "batch.conversations"], b[P + "batch.failed"], b[P + "batch.compacted"]) == (4, 1, 2)
    assert b[P + "tokens.saved"] == sum(r.saved_tokens for r in ok) == otel.saved() > 0
    assert parent.status.status_code == otel_trace.StatusCode.UNSET
    # No one inference span follows a batch: the caller's span is not flagged.
    assert telemetry.COMPACTED not in (caller.attributes or {})


def test_compact_many_with_a_summarizer_parents_its_calls_and_records_a_fallback(otel: Otel) -> None:
    def summarizer(request: Any) -> str:
        with otel.tracer.start_as_current_span("chat summary-model"):
            if "PLEASE-FAIL" in str(request.messages):
                raise TimeoutError("the summary model timed out")
            return SUMMARY

    good = conversation(30)
    bad = conversation(30)
    bad[3] = {**bad[3], "content": str(bad[3]["content"]) + " PLEASE-FAIL"}
    results = small(summarizer=summarizer).compact_many([good, bad, conversation(2)], max_concurrency=2)
    parent, children = batch_spans(otel)
    assert sorted(children) == [0, 1, 2]
    # Each summarizer call (in a worker thread) is a child of its own conversation's span.
    mine = {children[0].context.span_id, children[1].context.span_id}
    for chat in otel.spans("chat summary-model"):
        assert chat.parent is not None and chat.parent.span_id in mine
    a0, a1 = (dict(children[i].attributes or {}) for i in (0, 1))
    assert results[0].summary_source == "llm" and a0[P + "summary.source"] == "llm"
    assert "summary_failed" not in events(children[0])
    assert results[1].summary_source == "rule" and results[1].fallback_reason
    assert a1[P + "fallback.reason"] == results[1].fallback_reason
    assert event(children[1], "summary_failed")["error.type"] == "TimeoutError"
    assert dict(children[2].attributes or {})[P + "strategy"] == "none"
    assert dict(parent.attributes or {})[P + "tokens.saved"] == sum(r.saved_tokens for r in results) == otel.saved()


def test_acompact_many_and_a_batch_error(otel: Otel) -> None:
    async def summarizer(request: Any) -> str:
        with otel.tracer.start_as_current_span("chat summary-model"):
            await asyncio.sleep(0)
            return SUMMARY

    async def run() -> Any:
        return await small(summarizer=summarizer).acompact_many([conversation(30), 42], return_exceptions=False)

    with pytest.raises(Exception) as e:
        asyncio.run(run())
    assert type(e.value).__name__ == "BatchError"
    parent, children = batch_spans(otel)
    # The batch raised: its span is an error; the conversation that worked is traced as usual.
    assert parent.status.status_code == otel_trace.StatusCode.ERROR and "exception" in events(parent)
    assert dict(children[0].attributes or {})[P + "summary.source"] == "llm"
    assert children[1].status.status_code == otel_trace.StatusCode.ERROR
    chats = otel.spans("chat summary-model")
    assert chats and all(c.parent is not None and c.parent.span_id == children[0].context.span_id for c in chats)


def test_compact_many_without_an_sdk_counts_each_conversation_once(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "TRACER", otel_trace.NoOpTracer())
    results = small(summarizer=lambda request: SUMMARY).compact_many([conversation(30), conversation(30)])
    plain = small().compact_many([conversation(30), conversation(2)], force=True)
    assert otel.exporter.get_finished_spans() == ()
    assert otel.saved() == sum(r.saved_tokens for r in results + plain) > 0
