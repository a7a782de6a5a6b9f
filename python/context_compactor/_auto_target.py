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
``task_max_tokens``, the ledger (the one the context carries, the user's words the compaction
moves into it and room for its details: not the ledger's budgets, which in a small window are
most of it) and the summary's cap, and within ``AUTO_MIN``-``AUTO_MAX``
of the budget. Candidates are the ratios from ``AUTO_MIN`` to ``AUTO_MAX`` in steps of
``AUTO_STEP`` and the floor's own ratio; ties go to the larger target (it keeps more). The choice
is a pure function of the config, the counts and the state's observed growth (DESIGN invariant 4);
without an observed growth the fixed ratio :data:`AUTO_FALLBACK` applies.

Design note, when the next compaction is due (:func:`due_at`). The same cycle, left to run from
the ``T`` tokens a compaction left to a due point ``S``, bills per call about
``(T - F) w g / (S - T)`` (the prefix the compaction rewrote, spread over the cycle's calls) plus
``r (T + S) / 2`` (the reads of a context between ``T`` and ``S``) plus ``g w`` (the growth, the
same whatever ``S``). The first term falls and the second rises with ``S``; their sum is least at
``S - T = sqrt(2 (w / r) (T - F) g)``. So with ``"auto"``, after each compaction the next one is
due from ``T + max(g, that gap)`` when that is below the soft threshold: a conversation whose
compactions end far below the soft threshold and grows slowly compared with the window (a long
agent run in a large window) compacts earlier and reads a smaller context at each call; one whose
compactions end near the soft threshold (a small window, where the floor is most of it) keeps the
soft threshold. Deterministic: a function of the tokens after the compaction, the fixed part, the
growth the state observed before it and the prices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from context_compactor import _core

__all__ = [
    "AUTO_FALLBACK",
    "AUTO_MAX",
    "AUTO_MIN",
    "AutoTarget",
    "choose_target",
    "cycle_cost",
    "due_at",
    "ledger_tokens",
]

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
        fixed: The fixed part (system prompt and tool definitions), in tokens.
        prices: The prices weighed (input, cached read, cache write, output per million tokens).
    """

    ratio: float
    tokens: int
    floor: int
    growth: float | None
    cost_per_call: float | None
    fixed: int = 0
    prices: tuple[float, ...] = ()


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
        return AutoTarget(t / budget if budget else AUTO_FALLBACK, t, floor, None, None, fixed, tuple(prices))
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
    return AutoTarget(t / budget, t, floor, growth, cost, fixed, tuple(prices))


def due_at(tokens_after: int, *, soft: int, fixed: int, growth: float | None, prices: Sequence[float]) -> int | None:
    """The context size from which the compaction after one that left ``tokens_after`` tokens is
    due under ``target_ratio="auto"`` (see the module note): ``tokens_after + max(growth, gap)``
    with ``gap = sqrt(2 (w / r) (tokens_after - fixed) growth)``, ``w`` the price of what is not
    read from the cache and ``r`` that of a cache read; ``None`` (the soft threshold) without an
    observed growth or when that is not below ``soft``."""
    _, r, w, _ = (float(p) for p in prices)
    if growth is None or growth <= 0 or r <= 0:
        return None
    gap = math.sqrt(2.0 * (w / r) * max(0, tokens_after - fixed) * growth)
    due = math.ceil(tokens_after + max(growth, gap))
    return due if due < soft else None


#: Room in the target's floor for the details the next compaction adds to the ledger (must-keep
#: facts its narrative lacks), over the ledger the context already carries and the user's words
#: of the span it replaces.
LEDGER_SLACK_TOKENS = 256
_TEXT_TYPES = ("text", "input_text")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _field(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


def _user_text(message: Any) -> str:
    """The user's own text of a message (not a tool result sent with the user role)."""
    if _field(message, "role") != "user":
        return ""
    content = _field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [_field(b, "text") for b in content if _field(b, "type") in _TEXT_TYPES]
        return "\n".join(t for t in parts if isinstance(t, str))
    return ""


def ledger_tokens(messages: Sequence[Any], head: int, tail_start: int, count: Callable[[str], int]) -> int:
    """The tokens the ledger will take after the next compaction, for ``target_ratio="auto"``'s
    floor: the ledger of the summary the context already carries (it sits right after the kept
    head), the user's words of the messages the next compaction would replace (between the head
    and the recent tail) and :data:`LEDGER_SLACK_TOKENS` for its details. Not the ledger's budgets:
    they bound a long session's ledger, and in a small window most of the target would go to room
    it never uses (the target then stays high and every call reads more)."""
    ledger = 0
    for m in messages[head : head + 4]:
        for text in _strings(m if isinstance(m, (dict, list, tuple, str)) else getattr(m, "__dict__", {})):
            at = text.rfind(_core.LEDGER_SENTINEL)
            if at >= 0:
                ledger = max(ledger, count(text[at:]))
    words = sum(count(t) for m in messages[head:tail_start] if (t := _user_text(m)) and _core.SUMMARY_MARKER not in t)
    return ledger + words + LEDGER_SLACK_TOKENS
