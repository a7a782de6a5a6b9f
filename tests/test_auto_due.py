"""``target_ratio="auto"`` also chooses when the next compaction is due (issue [6/7]): after a
compaction that left ``T`` tokens, from ``T + sqrt(2 (w / r) (T - F) g)`` (the cycle length that
bills the least per call) when that is below the soft threshold; ``ConversationState.due_at``."""

from __future__ import annotations

import math
from typing import Any

from context_compactor import ContextCompactor, ConversationState, Session
from context_compactor._core import due_at
from context_compactor.config import DEFAULT_PRICES


def tool_round(msgs: list[dict[str, Any]], i: int, size: int) -> None:
    cid = f"d{len(msgs)}"
    msgs += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "cat f{i}"}}'}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": f"row {i} of the table " * (size // 5)},
    ]


def task() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Summarise every table under data/ into report.md."}]


def test_the_due_point_is_the_cycle_that_bills_the_least_per_call() -> None:
    openai = DEFAULT_PRICES["openai"]  # a cache read is a tenth of the input price
    gap = math.sqrt(2 * 10 * (10_000 - 2_000) * 500)
    assert due_at(10_000, soft=40_000, fixed=2_000, growth=500.0, prices=openai) == math.ceil(10_000 + gap)
    # Not below the soft threshold, no growth seen, a growth larger than the gap: as said.
    assert due_at(10_000, soft=12_000, fixed=2_000, growth=500.0, prices=openai) is None
    assert due_at(10_000, soft=40_000, fixed=2_000, growth=None, prices=openai) is None
    assert due_at(10_000, soft=40_000, fixed=10_000, growth=500.0, prices=openai) == 10_500
    # Anthropic's write costs 12.5 reads: a longer cycle.
    anthropic = DEFAULT_PRICES["anthropic"]
    assert due_at(10_000, soft=40_000, fixed=2_000, growth=500.0, prices=anthropic) > math.ceil(10_000 + gap)


def test_a_large_window_compacts_before_the_soft_threshold_and_a_fixed_target_does_not() -> None:
    auto = ContextCompactor(max_context_tokens=60_000, target_ratio="auto")
    fixed = ContextCompactor(max_context_tokens=60_000, target_ratio=0.5)
    soft = auto.config.soft_threshold
    seen: dict[str, list[tuple[int, int | None]]] = {}
    for name, c in (("auto", auto), ("fixed", fixed)):
        state = ConversationState()
        msgs = task()
        before: list[tuple[int, int | None]] = []
        for i in range(260):
            tool_round(msgs, i, 300)
            check = c.check(msgs, state=state)
            if check.should_compact:
                before.append((check.current_tokens, state.due_at))
                r = c.compact(msgs, state=state)
                assert r.compacted and not r.over_budget
                msgs = list(r.messages)
        seen[name] = before
    assert all(tokens >= soft for tokens, _ in seen["fixed"])
    # The first compaction is at the soft threshold (nothing chosen yet); later ones at the due
    # point the last one chose, below it, and so more often.
    first, *later = seen["auto"]
    assert first[0] >= soft and first[1] is None
    assert later and all(due is not None and due <= tokens < soft for tokens, due in later)
    assert len(seen["auto"]) > len(seen["fixed"])


def test_the_check_reports_the_due_point_and_a_session_compacts_there() -> None:
    c = ContextCompactor(max_context_tokens=60_000, target_ratio="auto")
    state = ConversationState()
    msgs = task()
    for i in range(260):
        tool_round(msgs, i, 300)
        if c.check(msgs, state=state).should_compact:
            msgs = list(c.compact(msgs, state=state).messages)
        if state.due_at is not None:
            break
    due = state.due_at
    assert due is not None and due < c.config.soft_threshold
    assert c.check(msgs, state=state).threshold == due
    assert "due_at=" in repr(state)
    # A Session (the same compactor) compacts from the due point too.
    with Session(compactor=c, store=":memory:") as s:
        s.extend(task())
        tokens: list[int] = []
        for i in range(260):
            grown: list[dict[str, Any]] = []
            tool_round(grown, i + 1000, 300)
            s.extend(grown)
            r = s.prepare()
            if r is not None and r.compacted:
                tokens.append(r.tokens_before)
        assert len(tokens) >= 3 and min(tokens[1:]) < c.config.soft_threshold
