"""The cut of a jump (issue 28): with ``background=True``, one call whose tool output takes the context
from under the soft threshold past the hard one is met by cutting that output head + tail (marked,
recorded ``shortened``, the original kept), not by a rule summary replacing the narrative. What the
agent sees: the context up to that call byte-identical (the cached prefix and an LLM summary in it
stay), the new output's head and tail, a request under the soft threshold, and the next
compaction made by the LLM. When the context was already over the soft threshold before the call,
or the growth cannot be cut alone, the rule summary applies as before."""

from __future__ import annotations

import asyncio
from typing import Any

from context_compactor import validate_messages
from context_compactor.session import Session
from test_background import SUMMARY, Gate, at_soft, compactor, grow_to, start
from test_session import tool_round

OMITTED = "chars omitted"


def session(gate: Gate, rounds: int = 6) -> Session:
    s = Session(compactor=compactor(gate), store=":memory:")
    start(s)
    for k in range(rounds):
        s.extend(tool_round(k, size=30))
    return s


def assert_cut(s: Session, prefix: list[dict[str, Any]], result: Any, big: list[dict[str, Any]]) -> None:
    """``result`` cut only the output of ``big`` (the call's growth); everything before is as it was."""
    cfg = s.compactor.config
    assert result is not None and result.strategy == "truncation" and result.summary_source is None
    assert not result.over_budget and result.tokens_after <= cfg.soft_threshold
    ctx = s.context()
    assert ctx[: len(prefix)] == prefix  # the cached prefix (and any summary in it) untouched
    assert ctx[len(prefix)] == big[0]  # the call: its arguments are short, kept
    cut, original = ctx[-1]["content"], big[1]["content"]
    assert len(cut) < len(original) and OMITTED in cut
    assert cut.startswith(original[:40]) and cut.endswith(original[-40:])
    assert validate_messages(ctx, format="openai") == []
    record = s.compactions()[-1]
    assert [e.action for e in result.record] == ["shortened"]
    assert s.expand(record.id) == [big[1]]  # the original output, as appended
    assert s.history()[-2:] == big


def test_a_first_read_past_the_hard_threshold_is_cut_not_summarised() -> None:
    gate = Gate(block=0)
    s = session(gate)
    assert s.prepare() is None and s.check().urgency == "none"
    prefix = s.context()
    big = tool_round(50, size=800)
    s.extend(big)
    assert s.check().urgency == "hard"
    result = s.prepare()
    assert_cut(s, prefix, result, big)
    # The conversation goes on: the next compaction with a summary is the LLM's.
    k = 60
    summarized: list[Any] = []
    while not summarized and k < 200:
        s.extend(tool_round(k, size=30))
        k += 1
        r = s.prepare()
        job = s.pending
        if job is not None:
            assert job.wait(5)
        if r is not None and r.summary_source is not None:
            summarized.append(r)
    assert summarized and summarized[0].summary_source == "llm"
    assert any("Checked the modules" in str(m.get("content")) for m in s.context())
    s.close()


def test_the_llm_summary_stays_when_a_jump_is_cut() -> None:
    gate = Gate(block=0)
    s = at_soft(gate)
    job = s.pending
    assert job is not None and job.wait(5)
    applied = s.prepare()
    assert applied is not None and applied.summary_source == "llm"
    assert s.check().urgency == "none"
    prefix = s.context()
    assert any(SUMMARY[9:40] in str(m.get("content")) for m in prefix)
    big = tool_round(70, size=800)
    s.extend(big)
    assert s.check().urgency == "hard"
    result = s.prepare()
    assert_cut(s, prefix, result, big)
    s.close()


def test_over_the_soft_threshold_before_the_call_the_rule_summary_applies() -> None:
    """A summary was already due (a job runs): the call's output is not cut alone, the running job's
    plan is applied with the rule summary and its LLM summary replaces it later."""
    gate = Gate(block=1)
    s = at_soft(gate)
    job = s.pending
    assert job is not None and gate.entered.wait(5)
    s.extend(tool_round(80, size=200))
    assert s.check().urgency == "hard"
    result = s.prepare()
    assert result is not None and result.summary_source == "rule" and result.strategy != "truncation"
    assert validate_messages(s.context(), format="openai") == []
    gate.release.set()
    assert job.wait(5)
    late = s.prepare()
    assert late is not None and late.summary_source == "llm"
    s.close()


def test_aprepare_cuts_the_jump_too() -> None:
    async def main() -> None:
        gate = Gate(block=0)
        s = session(gate)
        assert await s.aprepare() is None
        prefix = s.context()
        big = tool_round(50, size=800)
        s.extend(big)
        result = await s.aprepare()
        assert_cut(s, prefix, result, big)
        s.close()

    asyncio.run(main())


def test_a_summary_running_when_a_jump_is_cut_still_applies() -> None:
    """An early summary (started below the soft threshold) is running when the jump is cut: it goes
    on over its snapshot, and its LLM summary is applied later with the cut output and the newer
    messages after it, as they are."""
    gate = Gate(block=1)
    s = Session(compactor=compactor(gate), store=":memory:")
    start(s)
    k = 0
    while s.pending is None and s.check().urgency == "none" and k < 40:
        s.extend(tool_round(k, size=120))
        k += 1
        s.prepare()
    job = s.pending
    assert job is not None and job.early and gate.entered.wait(5)
    prefix = s.context()
    big = tool_round(90, size=800)
    s.extend(big)
    result = s.prepare()
    assert_cut(s, prefix, result, big)
    assert s.pending is job  # not cancelled: rebased onto the cut
    cut = s.context()[-2:]
    gate.release.set()
    assert job.wait(5)
    s.extend(tool_round(91, size=3))
    late = s.prepare()
    assert late is not None and late.summary_source == "llm"
    ctx = s.context()
    assert validate_messages(ctx, format="openai") == []
    assert ctx[-4:] == cut + tool_round(91, size=3)
    assert any("Checked the modules" in str(m.get("content")) for m in ctx)
    s.close()


def with_old_output(gate: Gate) -> tuple[Session, list[dict[str, Any]]]:
    """A session whose four older tool rounds hold large outputs (returned: the old rounds),
    then four small rounds: clearing the old outputs is worth it."""
    s = Session(compactor=compactor(gate, clear_at_least_tokens=100), store=":memory:")
    start(s)
    old = [m for k in range(4) for m in tool_round(k, size=60)]
    s.extend(old)
    for k in range(4, 8):
        s.extend(tool_round(k, size=5))
    return s, old


def test_old_output_is_cleared_rather_than_the_new_output_cut() -> None:
    """A jump at the hard threshold when clearing older tool output gets the context under it: the
    older output is cleared (micro-compaction) and the output just read stays whole. Clearing it
    rewrites the cached prefix from the first cleared message; the new output is not cached yet,
    so it is left out of that weight (``micro_min_gain_ratio``), which without this refused the
    clearing and cut the new output instead."""
    gate = Gate(block=0)
    s, old = with_old_output(gate)
    assert s.prepare() is None and s.check().urgency == "none"
    big = tool_round(50, size=450)
    s.extend(big)
    assert s.check().urgency == "hard"
    result = s.prepare()
    assert result is not None and result.strategy == "micro" and result.summary_source is None
    assert s.check().urgency != "hard"
    ctx = s.context()
    assert ctx[-2:] == big  # the new output whole: no "chars omitted"
    assert all(OMITTED not in str(m.get("content")) for m in ctx)
    assert [e.action for e in result.record] == ["cleared"] * 4
    cleared = [m for m in ctx if m.get("role") == "tool" and m.get("tool_call_id") in {f"call_{k}" for k in range(4)}]
    assert len(cleared) == 4 and all(m["content"] != o["content"] for m, o in zip(cleared, old[1::2], strict=True))
    record = s.compactions()[-1]
    assert s.expand(record.id) == old[1::2]  # the originals of the cleared outputs
    assert validate_messages(ctx, format="openai") == []
    s.close()


def test_over_the_soft_threshold_old_output_is_cleared_rather_than_the_narrative_summarised() -> None:
    """A summary is running (the context was over the soft threshold) when a call crosses the hard
    threshold, and clearing older tool output gets it under: the output is cleared even where the
    cache rule alone would not (the rule summary, the other way, rewrites more of the cached
    prefix and replaces the narrative), the running summary goes on, and the next compaction with
    a summary is the LLM's, not a rule summary."""
    gate = Gate(block=1)
    s, _ = with_old_output(gate)
    grow_to(s, "soft", 10)
    assert s.prepare() is None
    job = s.pending
    assert job is not None and gate.entered.wait(5)
    prefix = s.context()
    s.extend(tool_round(50, size=150))
    assert s.check().urgency == "hard"
    result = s.prepare()
    assert result is not None and result.strategy == "micro" and result.summary_source is None
    assert [e.action for e in result.record] == ["cleared"] * 4
    assert s.check().urgency != "hard" and s.pending is job
    ctx = s.context()
    # Only the old outputs changed: everything else, the narrative and the new output, as it was.
    changed = [k for k, (a, b) in enumerate(zip(prefix, ctx[: len(prefix)], strict=True)) if a != b]
    assert [prefix[k]["tool_call_id"] for k in changed] == [f"call_{k}" for k in range(4)]
    assert ctx[len(prefix) :] == tool_round(50, size=150)
    gate.release.set()
    assert job.wait(5)
    s.extend(tool_round(51, size=3))
    late = s.prepare()
    assert late is not None and late.summary_source == "llm"
    assert all(r.strategy != "rule_summary" for r in s.compactions())
    assert validate_messages(s.context(), format="openai") == []
    s.close()
