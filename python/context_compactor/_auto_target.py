"""``target_ratio="auto"``: the target that minimises the predicted billed input per model call
over a whole compaction cycle, per conversation.

Design note, the model. A cycle starts with a compaction that leaves the context at ``T`` tokens
(the fixed part ``F``, system prompt and tool definitions, included) and lasts
``n = ceil((S - T) / g)`` model calls, ``S`` being the soft threshold and ``g`` the growth per call
the :class:`ConversationState` observed. Prices are per million tokens: ``r`` for a cache read,
``w`` for what is not read from the cache (a cache write with Anthropic, the uncached input
price with OpenAI, which charges no write), ``i`` for plain input and ``o`` for output.

- the compaction's own cost: its call reads ``F`` (the prefix the compaction does not touch) and
  writes the new prefix ``T - F``; with an LLM summarizer, its input (the span, about ``S - T``
  tokens, with its prompt and the previous summary) and its output (the summary's cap);
- every later call of the cycle reads the previous call's context from the cache and writes the
  growth ``g``;
- the cache's lifetime is the cycle: the next compaction rewrites the prefix after ``F``.

The cost per call of a cycle rises with ``T`` (a deeper compaction rewrites less and lasts
longer), so the choice is bounded by what must stay: never below the floor that keeps
``keep_recent_messages``/``keep_recent_tokens`` of the tail (the last block with it), the task at
``task_max_tokens``, the ledger's budgets and the summary's cap, and within ``AUTO_MIN``-``AUTO_MAX``
of the budget. Candidates are the ratios from ``AUTO_MIN`` to ``AUTO_MAX`` in steps of
``AUTO_STEP`` and the floor's own ratio; ties go to the larger target (it keeps more). The choice
is a pure function of the config, the counts and the state's observed growth (DESIGN invariant 4);
without an observed growth the fixed ratio :data:`AUTO_FALLBACK` applies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["AUTO_FALLBACK", "AUTO_MAX", "AUTO_MIN", "AutoTarget", "choose_target", "cycle_cost"]

AUTO_MIN = 0.2
AUTO_MAX = 0.7
AUTO_STEP = 0.05
#: The target ratio without an observed growth (no state, or fewer than two calls seen).
AUTO_FALLBACK = 0.5
#: Tokens of the summarizer's prompt around the span (instructions, task, previous summary header).
PROMPT_TOKENS = 600


@dataclass(frozen=True)
class AutoTarget:
    """What ``target_ratio="auto"`` chose for one compaction.

    Attributes:
        ratio: The target as a share of the budget.
        tokens: The target in tokens.
        floor: The smallest target that keeps the tail, the task, the ledger and the summary.
        growth: The growth per call it was computed from (``None``: the fixed fallback ratio).
        cost_per_call: The predicted billed input per model call over a cycle (dollars), at the
            chosen target (``None`` with the fallback).
    """

    ratio: float
    tokens: int
    floor: int
    growth: float | None
    cost_per_call: float | None


def cycle_cost(
    target: int,
    *,
    soft: int,
    fixed: int,
    growth: float,
    prices: Sequence[float],
    llm: bool,
    summary_tokens: int,
) -> float:
    """The predicted billed input per model call (dollars) over one compaction cycle that starts at
    ``target`` tokens (see the module note). ``prices``: input, cached read, cache write, output,
    in dollars per million tokens."""
    i, r, w, o = (float(p) for p in prices)
    g = max(1.0, growth)
    span = max(0, soft - target)
    n = max(1, math.ceil(span / g))
    fixed = min(fixed, target)
    cost = fixed * r + (target - fixed) * w  # the compaction's call: the new prefix written
    if llm:
        cost += (span + summary_tokens + PROMPT_TOKENS) * i + summary_tokens * o
    # The calls after it: the previous context read, the growth written. Sum over k = 1..n-1 of
    # (target + (k - 1) g) r + g w.
    later = n - 1
    cost += later * target * r + r * g * later * (later - 1) / 2 + later * g * w
    return cost / n / 1e6


def choose_target(
    *,
    budget: int,
    soft: int,
    fixed: int,
    floor: int,
    growth: float | None,
    prices: Sequence[float],
    llm: bool,
    summary_share: float | None,
    summary_max_tokens: int,
) -> AutoTarget:
    """The target of one compaction under ``target_ratio="auto"`` (see the module note)."""
    lo = max(int(AUTO_MIN * budget), min(floor, int(AUTO_MAX * budget)))
    hi = min(int(AUTO_MAX * budget), soft)
    if growth is None or budget <= 0:
        t = min(max(int(AUTO_FALLBACK * budget), lo), soft)
        return AutoTarget(t / budget if budget else AUTO_FALLBACK, t, floor, None, None)
    steps = round((AUTO_MAX - AUTO_MIN) / AUTO_STEP)
    candidates = {int((AUTO_MIN + k * AUTO_STEP) * budget) for k in range(steps + 1)} | {lo}
    candidates = {min(max(c, lo), hi) for c in candidates} if lo <= hi else {min(lo, soft)}
    best: tuple[float, int] | None = None
    for t in sorted(candidates, reverse=True):  # ties go to the larger target
        summary = summary_max_tokens
        if summary_share:
            summary = min(summary_max_tokens, max(256, int(t * summary_share)))
        c = cycle_cost(t, soft=soft, fixed=fixed, growth=growth, prices=prices, llm=llm, summary_tokens=summary)
        if best is None or c < best[0] - 1e-15:
            best = (c, t)
    assert best is not None
    cost, t = best
    return AutoTarget(t / budget, t, floor, growth, cost)
