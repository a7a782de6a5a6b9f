"""No compaction loops (issue [6/7]): after a compaction that could not get under the soft
threshold, ``check()``/``should_compact()``/``compact()`` with a state and a Session's ``prepare()``
hold the next one until the context has grown by ``retry_growth_tokens`` or crossed the hard
threshold. The conversations here have a system prompt that fills most of the window, as the
tau-bench airline transcript does: no compaction can get under the soft threshold."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from context_compactor import CompactionConfig, ConfigError, ContextCompactor, ConversationState, Session

# A policy document as long as most of the window: the context can never get under the soft
# threshold (invariant 5: over_budget, naming the system prompt).
SYSTEM = "Airline policy. " + " ".join(f"Rule {i}: refunds of fare class {i % 7} need a reason." for i in range(300))
CFG = CompactionConfig(
    max_context_tokens=7_000, reserve_tokens=1_000, soft_threshold_tokens=4_000, retry_growth_tokens=1_000
)


def turn(i: int, words: int = 8) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Question {i}: " + "please check the booking again " * words},
        {"role": "assistant", "content": f"Answer {i}: the booking ABC{i} is confirmed."},
    ]


def conversation(turns: int, words: int = 8) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Change my flight to Friday, keep the seat."}]
    for i in range(turns):
        msgs += turn(i, words)
    return msgs


def stuck() -> tuple[ContextCompactor, ConversationState, list[dict[str, Any]]]:
    """A compactor, a state and a conversation whose compaction just ended over_budget."""
    c = ContextCompactor(CFG)
    state = ConversationState()
    msgs = conversation(12)
    assert c.check(msgs, system=SYSTEM, state=state).urgency == "soft"
    r = c.compact(msgs, system=SYSTEM, state=state)
    assert r.over_budget and r.tokens_after > CFG.soft_threshold
    assert state.hold_until == r.tokens_after + CFG.retry_growth
    return c, state, r.messages


def test_the_default_growth_is_the_gap_between_the_thresholds() -> None:
    cfg = CFG.replace(retry_growth_tokens=None)
    assert cfg.retry_growth == cfg.hard_threshold - cfg.soft_threshold == 2_000
    assert CompactionConfig().retry_growth == 24_000
    assert CFG.replace(retry_growth_tokens=123).retry_growth == 123
    with pytest.raises(ConfigError) as e:
        CompactionConfig(retry_growth_tokens=-1)
    assert e.value.field == "retry_growth_tokens"


def test_after_an_over_budget_compaction_check_reports_nothing_due_until_the_context_grew() -> None:
    c, state, msgs = stuck()
    msgs = [*msgs, *turn(100, 2)]
    check = c.check(msgs, system=SYSTEM, state=state)
    assert check.current_tokens > CFG.soft_threshold
    assert (check.urgency, check.should_compact, check.held_until) == ("none", False, state.hold_until)
    assert not c.should_compact(msgs, system=SYSTEM, state=state)
    # compact() with the state agrees: nothing done, the reason says why.
    r = c.compact(msgs, system=SYSTEM, state=state)
    assert r.strategy == "none" and not r.compacted and "held" in (r.reason or "")
    assert r.messages == msgs
    # Without the state there is no memory: due as before.
    assert c.check(msgs, system=SYSTEM).urgency == "soft"
    # Grown by retry_growth_tokens: due again.
    hold = state.hold_until
    assert hold is not None
    while c.check(msgs, system=SYSTEM).current_tokens < hold:
        msgs = [*msgs, *turn(len(msgs), 4)]
    check = c.check(msgs, system=SYSTEM, state=state)
    assert check.current_tokens < CFG.hard_threshold
    assert (check.urgency, check.should_compact, check.held_until) == ("soft", True, None)


def test_the_hard_threshold_is_never_held() -> None:
    c, state, msgs = stuck()
    big = [*msgs, {"role": "user", "content": "The whole log: " + "line of the log. " * 700}]
    check = c.check(big, system=SYSTEM, state=state)
    assert check.current_tokens >= CFG.hard_threshold
    assert (check.urgency, check.should_compact, check.held_until) == ("hard", True, None)
    r = c.compact(big, system=SYSTEM, state=state)
    assert r.compacted


def test_a_compaction_short_of_the_target_with_little_room_holds_too() -> None:
    # The airline shape: the smallest context is just under the soft threshold, so every
    # compaction "fits" by a few tokens and the next call is over again.
    cfg = CFG.replace(retry_growth_tokens=None)  # the gap: 2,000
    c = ContextCompactor(cfg)
    state = ConversationState()
    system = SYSTEM[: len(SYSTEM) * 85 // 100]
    r = c.compact(conversation(14), system=system, state=state)
    assert r.compacted and not r.over_budget
    assert cfg.target_tokens < r.tokens_after <= cfg.soft_threshold
    assert state.hold_until == r.tokens_after + 2_000
    more = [*r.messages, *turn(1, 30)]
    check = c.check(more, system=system, state=state)
    assert check.current_tokens > cfg.soft_threshold and not check.should_compact


def test_a_compaction_that_fits_lifts_the_hold() -> None:
    c, state, msgs = stuck()
    # The system prompt shrinks (the caller trimmed it): a forced compaction now fits.
    r = c.compact(msgs, system="Airline policy, short.", state=state, force=True)
    assert not r.over_budget
    assert state.hold_until is None


def test_retry_growth_zero_turns_the_hold_off() -> None:
    c = ContextCompactor(CFG.replace(retry_growth_tokens=0))
    state = ConversationState()
    r = c.compact(conversation(12), system=SYSTEM, state=state)
    assert r.over_budget and state.hold_until is None
    assert c.check([*r.messages, *turn(99, 2)], system=SYSTEM, state=state).urgency == "soft"


@pytest.mark.parametrize("min_savings_ratio", [0.0, 0.1])
def test_a_session_does_not_compact_at_every_call(min_savings_ratio: float) -> None:
    # min_savings_ratio=0: each compaction changes the context and still ends over_budget; 0.1:
    # each is refused (it saves too little), which is over_budget too above the soft threshold.
    c = ContextCompactor(CFG.replace(min_savings_ratio=min_savings_ratio))
    attempts: list[int] = []
    compacted_at: list[int] = []
    with Session(compactor=c, store=":memory:", system=SYSTEM) as s:
        s.append({"role": "user", "content": "Change my flight to Friday, keep the seat."})
        hold = None
        for i in range(60):
            r = s.prepare()
            if r is not None and r.changed:
                compacted_at.append(i)
            if s.state.hold_until != hold:
                hold = s.state.hold_until
                attempts.append(i)
            assert s.check().current_tokens < CFG.hard_threshold
            s.extend(turn(i, 3))
    assert len(attempts) >= 2, "the conversation passes the soft threshold and stays over it"
    # Each call adds ~40 tokens and the hold is 1,000 tokens of growth: an attempt every ~25
    # calls, never one within 3 calls of another (the hard threshold is never reached here).
    for seq in (attempts, compacted_at):
        assert all(b - a > 3 for a, b in itertools.pairwise(seq)), seq
    if min_savings_ratio == 0:
        assert compacted_at
