"""``target_ratio="auto"`` (issue [6/7]): per conversation, the target that minimises the predicted
billed input per model call over a compaction cycle, from the growth a ConversationState observed
and a price table; bounded, never below what keeps the recent tail, deterministic, reported."""

from __future__ import annotations

from typing import Any

import pytest

from context_compactor import CompactionConfig, ConfigError, ContextCompactor, ConversationState
from context_compactor._core import AUTO_MAX, AUTO_MIN, cycle_cost
from context_compactor.config import DEFAULT_PRICES
from context_compactor.eval.cost import PRICES


def grow(state: ConversationState, c: ContextCompactor, msgs: list[dict[str, Any]], calls: int, size: int) -> None:
    """``calls`` model calls, each adding a tool round of about ``size`` tokens, checked with the state."""
    for i in range(calls):
        cid = f"g{len(msgs)}"
        msgs += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"command": "cat f{i}"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": cid, "content": "data row of the table " * (size // 5)},
        ]
        c.check(msgs, state=state)


def task() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Summarise every table under data/ into report.md."}]


def test_the_default_prices_are_the_evals() -> None:
    for k, t in PRICES.items():
        assert DEFAULT_PRICES[k][:3] == (t.input, t.cached_read, t.cache_write)
    cfg = CompactionConfig(target_ratio="auto")
    assert cfg.price_table("anthropic") == DEFAULT_PRICES["anthropic"]
    assert cfg.price_table("responses") == DEFAULT_PRICES["openai"]
    assert cfg.replace(prices=[1, 0.1, 1.25, 5]).price_table("anthropic") == (1, 0.1, 1.25, 5)
    for bad in ((1, 2, 3), (1, 2, 3, -1), ("a", 1, 1, 1), (1, 1, float("nan"), 1)):
        with pytest.raises(ConfigError) as e:
            CompactionConfig(prices=bad)  # type: ignore[arg-type]
        assert e.value.field == "prices"
    with pytest.raises(ConfigError) as e:
        CompactionConfig(target_ratio="deep")  # type: ignore[arg-type]
    assert e.value.field == "target_ratio"


def test_the_cost_per_call_rises_with_the_target_and_an_llm_adds_its_own() -> None:
    kw: dict[str, Any] = {"soft": 80_000, "fixed": 5_000, "growth": 1_500.0, "summary_tokens": 800}
    for prices in DEFAULT_PRICES.values():
        costs = [cycle_cost(t, prices=prices, llm=False, **kw) for t in range(20_000, 70_001, 5_000)]
        assert costs == sorted(costs)
        assert cycle_cost(40_000, prices=prices, llm=True, **kw) > cycle_cost(40_000, prices=prices, llm=False, **kw)


def test_without_an_observed_growth_the_fixed_ratio() -> None:
    c = ContextCompactor(max_context_tokens=20_000, target_ratio="auto")
    assert c.config.target_tokens == min(int(0.5 * c.config.budget), c.config.soft_threshold)
    msgs = task()
    grow(ConversationState(), c, msgs, 40, 300)
    r = c.compact(msgs)  # no state: no growth known
    assert r.compacted and r.target_ratio == 0.5
    assert c.auto_target(msgs).growth is None


def test_with_a_state_the_target_is_chosen_bounded_deterministic_and_reported() -> None:
    c = ContextCompactor(max_context_tokens=40_000, target_ratio="auto")
    state = ConversationState()
    msgs = task()
    grow(state, c, msgs, 40, 400)
    assert state.growth_per_call is not None and state.growth_per_call > 300
    a = c.auto_target(msgs, state=state)
    assert a == c.auto_target(msgs, state=state)  # deterministic
    assert AUTO_MIN <= a.ratio <= AUTO_MAX
    assert a.tokens >= a.floor or a.ratio == AUTO_MAX
    assert a.cost_per_call is not None and a.growth == state.growth_per_call
    r = c.compact(msgs, state=state)
    assert r.compacted and r.target_ratio == a.ratio
    # The same conversation and state, a second compactor: the same choice and the same output.
    state2 = ConversationState()
    msgs2 = task()
    grow(state2, c, msgs2, 40, 400)
    r2 = c.compact(msgs2, state=state2)
    assert (r2.target_ratio, r2.tokens_after, r2.summary) == (r.target_ratio, r.tokens_after, r.summary)


def test_never_below_what_keeps_the_recent_tail() -> None:
    c = ContextCompactor(max_context_tokens=40_000, target_ratio="auto", keep_recent_messages=30)
    state = ConversationState()
    msgs = task()
    grow(state, c, msgs, 40, 400)
    a = c.auto_target(msgs, state=state)
    tail = sum(c.counter.count_each(msgs[-30:]).messages)
    assert a.floor >= tail
    if a.floor <= int(AUTO_MAX * c.config.budget):
        assert a.tokens >= a.floor
    else:  # a floor the bounds cannot keep: the fixed ratio
        assert a.ratio == 0.5
    small_tail = ContextCompactor(max_context_tokens=40_000, target_ratio="auto", keep_recent_messages=2)
    assert small_tail.auto_target(msgs, state=state).ratio <= a.ratio


def test_a_floor_over_the_bound_gives_the_fixed_ratio_not_the_bound() -> None:
    """A recent tail larger than AUTO_MAX of the budget cannot be kept: held at AUTO_MAX, every
    cycle would last a call or two. The target is then the fixed ratio, with the growth still
    reported."""
    c = ContextCompactor(max_context_tokens=8_000, target_ratio="auto", keep_recent_messages=40)
    state = ConversationState()
    msgs = task()
    grow(state, c, msgs, 40, 400)
    a = c.auto_target(msgs, state=state)
    assert a.floor > AUTO_MAX * c.config.budget
    assert a.ratio == 0.5 and a.growth == state.growth_per_call and a.cost_per_call is not None
    r = c.compact(msgs, state=state)
    assert r.compacted and r.target_ratio == 0.5


def test_the_floor_holds_the_ledger_the_context_carries_not_the_ledgers_budgets() -> None:
    # A small window: the ledger's budgets (2,000 + 1,500 tokens) would be most of it.
    c = ContextCompactor(max_context_tokens=8_000, target_ratio="auto")
    cfg = c.config
    state = ConversationState()
    msgs = task()
    grow(state, c, msgs, 12, 150)
    fresh = c.auto_target(msgs, state=state)
    assert fresh.floor < cfg.user_words_token_limit + cfg.details_token_limit
    # The user's words the next compaction would move into the ledger count: a long instruction
    # of the user's between the head and the recent tail raises the floor by its tokens.
    words = "Never touch the files under vendor/ and always run the linter before a commit. " * 20
    said = [*msgs[:3], {"role": "user", "content": words}, *msgs[3:]]
    assert c.auto_target(said, state=state).floor - fresh.floor == c.counter.count(words)
    # After a compaction: the floor holds the ledger its summary carries, whole.
    r = c.compact(said, state=state, force=True)
    (summary,) = [m for m in r.messages if "[context-compactor ledger v1]" in str(m.get("content"))]
    body = summary["content"]
    ledger = body[body.index("[context-compactor ledger v1]") :]
    assert "Never touch the files under vendor/" in ledger
    after = [*r.messages]
    grow(state, c, after, 6, 150)
    with_ledger = c.auto_target(after, state=state)
    i = after.index(summary)
    without = [*after[:i], {**summary, "content": body[: body.index("[context-compactor ledger v1]")]}, *after[i + 1 :]]
    assert with_ledger.floor - c.auto_target(without, state=state).floor == c.counter.count(ledger)
