"""The summarizer contract a user relies on: how often the summarizer is called (one call per
chunk of the replaced span), how long a compaction may wait for it (``summarizer_timeout_s``
bounds the whole compaction, every chunk together), and what a failure in a later chunk keeps
(the chunks summarised before it; the rule summary covers only the rest)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest

from _messages import conversation
from context_compactor import ContextCompactor, SummaryRequest, validate_messages


def chunked(**kw: Any) -> ContextCompactor:
    """A window at which the span of ``conversation()`` is summarised in several chunks."""
    return ContextCompactor(max_context_tokens=12_000, reserve_tokens=1_000, clear_at_least_tokens=0, **kw)


def chunks_of(compactor: ContextCompactor) -> int:
    plan = compactor.plan(conversation(), force=True)
    assert plan.request is not None
    return plan.request.chunks


def test_a_long_span_is_summarised_in_chunks_each_updating_the_last() -> None:
    seen: list[SummaryRequest] = []

    def summarize(req: SummaryRequest) -> str:
        seen.append(req)
        return f"CHUNK-{req.chunk}-NARRATIVE: the agent read files and fixed the tax rounding."

    c = chunked(summarizer=summarize)
    n = chunks_of(c)
    assert n >= 3, "the fixture must be chunked at this window"
    r = c.compact(conversation(), force=True)
    assert [q.chunk for q in seen] == list(range(n)) and all(q.chunks == n for q in seen)
    # Each chunk gets the summary of the chunks before it (the narrative, never the ledger).
    for prev, q in itertools.pairwise(seen):
        assert q.previous_summary is not None and f"CHUNK-{prev.chunk}-NARRATIVE" in q.previous_summary
    assert r.strategy == "summary" and r.fallback_reason is None
    assert f"CHUNK-{n - 1}-NARRATIVE" in (r.summary or "")


def test_the_timeout_bounds_the_whole_compaction_not_each_chunk() -> None:
    # Each call takes 0.4 s and the timeout is 1 s: per chunk every call would fit, but the
    # compaction as a whole must not wait more than about 1 s.
    release = threading.Event()

    def slow(req: SummaryRequest) -> str:
        release.wait(0.4)
        return f"chunk {req.chunk} summary: the tax rounding was investigated."

    c = chunked(summarizer=slow, summarizer_timeout_s=1.0)
    assert chunks_of(c) >= 3
    t0 = time.monotonic()
    r = c.compact(conversation(), force=True)
    took = time.monotonic() - t0
    assert took < 1.0 + 0.6, f"the compaction waited {took:.2f} s with summarizer_timeout_s=1"
    assert r.fallback_reason is not None and "summarizer_timeout_s=1" in r.fallback_reason
    assert validate_messages(r.messages) == [] and not r.over_budget


def test_the_timeout_bounds_the_whole_compaction_under_acompact() -> None:
    async def slow(req: SummaryRequest) -> str:
        await asyncio.sleep(0.4)
        return f"chunk {req.chunk} summary: the tax rounding was investigated."

    c = chunked(summarizer=slow, summarizer_timeout_s=1.0)
    t0 = time.monotonic()
    r = asyncio.run(c.acompact(conversation(), force=True))
    took = time.monotonic() - t0
    assert took < 1.6, f"acompact waited {took:.2f} s with summarizer_timeout_s=1"
    assert r.fallback_reason is not None and "summarizer_timeout_s=1" in r.fallback_reason


@pytest.mark.parametrize("failing_chunk", [1, 2])
def test_a_failure_in_a_later_chunk_keeps_the_chunks_before_it(failing_chunk: int) -> None:
    class Overloaded(Exception):
        status_code = 529

    def summarize(req: SummaryRequest) -> str:
        if req.chunk == failing_chunk:
            raise Overloaded("overloaded")
        return f"KEPT-CHUNK-{req.chunk}: the agent traced the rounding bug to tax.py."

    c = chunked(summarizer=summarize)
    assert chunks_of(c) > failing_chunk
    r = c.compact(conversation(), force=True)
    summary = r.summary or ""
    # What the summarizer wrote for the chunks before the failure is in the summary...
    for k in range(failing_chunk):
        if k == failing_chunk - 1:
            assert f"KEPT-CHUNK-{k}" in summary, summary[:400]
    # ... the failure is reported, and the rest is the rule summary (it names what it replaced).
    assert r.fallback_reason is not None and "Overloaded" in r.fallback_reason
    # The rest is covered by the rule summary: its narrative names files read in the later chunks.
    narrative = summary.split("Preserved details")[0]
    assert any(f"f{i}.py" in narrative for i in range(20, 27)), narrative[-600:]
    assert r.summary_source == "llm"
    assert validate_messages(r.messages) == [] and not r.over_budget
    assert "/srv/app/billing/tax.py" in "".join(str(m.get("content")) for m in r.messages)


def test_a_failure_in_the_first_chunk_is_the_rule_summary() -> None:
    def summarize(req: SummaryRequest) -> str:
        raise TimeoutError("upstream timed out")

    r = chunked(summarizer=summarize).compact(conversation(), force=True)
    assert r.summary_source == "rule" and r.fallback_reason is not None
