"""Billed input cost of a sequence of model calls, with the providers' prompt caching simulated.

Each call is a :class:`Prompt`: the tokens of its fixed part (tool definitions and system prompt),
the identity and tokens of each message. Two caches:

- **OpenAI** (automatic prefix caching): a prompt of 1,024 tokens or more reads from the cache
  the longest prefix it shares with an earlier prompt, counted from 1,024 tokens in 128-token
  steps (rounded down); the rest is billed as input. There is no charge for writing.
- **Anthropic** (a ``cache_control`` breakpoint on the last message of every call): the prompt
  up to the breakpoint is written to the cache (1.25x the input price), except the part read
  from it: the longest earlier breakpoint prefix the prompt starts with, found when it is at most
  20 blocks (messages here) before the new breakpoint. Prompts under 1,024 tokens are not cached.

Prices are dollars per million tokens (:class:`PriceTable`); the defaults are list prices of two
current models (:data:`PRICES`). Only the input side is billed: the output is the transcript's
own and the same under every policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["PRICES", "CallCost", "PriceTable", "Prompt", "simulate"]


@dataclass(frozen=True)
class PriceTable:
    """Dollars per million input tokens: uncached, read from the cache, written to it."""

    name: str
    cache: str  # "openai" (automatic prefix caching) or "anthropic" (breakpoint on the last message)
    input: float
    cached_read: float
    cache_write: float


#: The default price tables (list prices, USD per million tokens).
PRICES: dict[str, PriceTable] = {
    "openai": PriceTable("openai gpt-5", "openai", input=1.25, cached_read=0.125, cache_write=1.25),
    "anthropic": PriceTable("anthropic claude-sonnet-4", "anthropic", input=3.0, cached_read=0.30, cache_write=3.75),
}

OPENAI_MIN = 1024
OPENAI_STEP = 128
ANTHROPIC_MIN = 1024
ANTHROPIC_LOOKBACK = 20


@dataclass(frozen=True)
class Prompt:
    """One model call's input: the fixed part (identity and tokens) and each message's identity
    and tokens, in order."""

    fixed_key: object
    fixed_tokens: int
    keys: tuple[object, ...]
    tokens: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.fixed_tokens + sum(self.tokens)


@dataclass
class CallCost:
    """The billed input of one call."""

    tokens: int
    cached: int
    written: int
    dollars: float


@dataclass
class CostReport:
    """Every call's cost under one price table, and the total."""

    prices: PriceTable
    calls: list[CallCost] = field(default_factory=list)

    @property
    def dollars(self) -> float:
        return sum(c.dollars for c in self.calls)

    @property
    def cached_share(self) -> float | None:
        total = sum(c.tokens for c in self.calls)
        return sum(c.cached for c in self.calls) / total if total else None


def _common(a: Prompt, b: Prompt) -> tuple[int, int]:
    """(messages, tokens) of the prefix two prompts share (nothing when the fixed part differs)."""
    if a.fixed_key != b.fixed_key:
        return 0, 0
    n, t = 0, a.fixed_tokens
    for ka, kb, ta in zip(a.keys, b.keys, a.tokens, strict=False):
        if ka != kb:
            break
        n += 1
        t += ta
    return n, t


def simulate(prompts: Sequence[Prompt], prices: PriceTable) -> CostReport:
    """The billed input of each call of ``prompts`` under ``prices``' cache model."""
    report = CostReport(prices)
    seen: list[Prompt] = []
    for p in prompts:
        total = p.total
        cached = written = 0
        if prices.cache == "openai":
            if total >= OPENAI_MIN:
                best = max((_common(p, q)[1] for q in seen[-64:]), default=0)
                if best >= OPENAI_MIN:
                    cached = OPENAI_MIN + (best - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP
        else:
            if total >= ANTHROPIC_MIN:
                n = len(p.keys)
                for q in seen[-64:]:
                    shared_n, shared_t = _common(p, q)
                    # An earlier breakpoint (q's last message) the prompt fully contains, near enough.
                    if shared_n == len(q.keys) and n - shared_n <= ANTHROPIC_LOOKBACK and q.total >= ANTHROPIC_MIN:
                        cached = max(cached, shared_t)
                written = total - cached
        uncached = total - cached - written
        dollars = (uncached * prices.input + cached * prices.cached_read + written * prices.cache_write) / 1e6
        report.calls.append(CallCost(total, cached, written, dollars))
        seen.append(p)
    return report
