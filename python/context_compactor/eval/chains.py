"""Chained compactions of one planted conversation, scored per canary and round.

A chain is five (or ten) compactions in a row, each of the previous one's output, every one
forced (``compact(force=True)`` with ``min_savings_ratio=0``, so none is refused):

- **forced**: the whole planted conversation, then its compacted output again and again with
  no new message (DESIGN's invariant 8: only the narrative may change);
- **growing**: the conversation split at model calls into as many slices as rounds; each round
  appends the next slice to the previous output and compacts (what an agent's loop does).

After each round every canary said so far is looked for (:func:`~.canaries.survivors`) and a
lost one is checked against ``result.must_keep_missing`` of that round or an earlier one (the
ledger lists what it evicts there): lost and not listed is a *silent loss*. A forced round that
ends with ``strategy="none"`` is reported; so is a round over the soft threshold without
``over_budget``, or ``over_budget`` without a reason.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from context_compactor.compactor import ContextCompactor
from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError
from context_compactor.eval.adversarial import FAKE_ENTRY
from context_compactor.eval.facts import haystack
from context_compactor.eval.ledger_view import growth_allowance, ledger_text
from context_compactor.io import Transcript
from context_compactor.replay import model_calls

__all__ = ["CHAINS", "ChainRound", "ChainRun", "chain_config", "run_chain", "slices"]

CHAINS = ("forced", "growing")
#: A window for "unbudgeted" runs: this many times the conversation (and never under the default).
UNBUDGETED_FACTOR = 4
#: The smallest window a budget gives (the eval's MIN_WINDOW: a tiny conversation at 10% would
#: not hold its task).
MIN_WINDOW = 1500


@dataclass
class ChainRound:
    """One compaction of a chain: what it did and which canaries were there after it."""

    round: int
    strategy: str
    reason: str | None
    tokens_before: int
    tokens_after: int
    soft_threshold: int
    over_budget: bool
    over_budget_reason: str | None
    summary_truncated: bool
    must_keep_missing: int
    said: list[bool]
    kept: list[bool]
    listed: list[bool]
    ledger_chars: int | None
    ledger_allowance: int
    fake_in_ledger: int
    fake_entries: int
    seconds: float
    #: The compaction's target as a share of the budget (``result.target_ratio``).
    target_ratio: float | None = None
    #: In a replay (:mod:`.planted`): the model call (0-based) the compaction ran before.
    call: int | None = None

    @classmethod
    def of(cls, result: Any, soft_threshold: int, **rest: Any) -> ChainRound:
        """A round of ``result`` (a ``CompactionResult``): its own fields, and ``rest``."""
        return cls(
            strategy=result.strategy,
            reason=result.reason,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            soft_threshold=soft_threshold,
            over_budget=result.over_budget,
            over_budget_reason=result.over_budget_reason,
            summary_truncated=result.summary_truncated,
            must_keep_missing=len(result.must_keep_missing),
            target_ratio=result.target_ratio,
            **rest,
        )

    @property
    def within(self) -> bool:
        """Under the soft threshold, or over it with ``over_budget`` and its reason."""
        return self.tokens_after <= self.soft_threshold or (self.over_budget and bool(self.over_budget_reason))

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "strategy": self.strategy,
            "reason": self.reason,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "soft_threshold": self.soft_threshold,
            "over_budget": self.over_budget,
            "over_budget_reason": self.over_budget_reason,
            "summary_truncated": self.summary_truncated,
            "must_keep_missing": self.must_keep_missing,
            "said": self.said,
            "kept": self.kept,
            "listed": self.listed,
            "ledger_chars": self.ledger_chars,
            "ledger_allowance": self.ledger_allowance,
            "fake_in_ledger": self.fake_in_ledger,
            "fake_entries": self.fake_entries,
            "within": self.within,
            "seconds": round(self.seconds, 3),
            "target_ratio": self.target_ratio,
            "call": self.call,
        }


@dataclass
class ChainRun:
    """One chain of one planted conversation under one summarizer and window."""

    file: str
    chain: str
    summarizer: str
    budget: str
    window: int
    canaries: list[Any]
    rounds: list[ChainRound] = field(default_factory=list)
    error: str | None = None

    def problems(self) -> list[str]:
        """What breaks the chain's promises, in words: forced rounds that did nothing, rounds over
        the threshold without ``over_budget`` and a reason, a forced round that returned more
        tokens than it got, a ledger that grew with nothing new."""
        out = []
        previous: ChainRound | None = None
        for r in self.rounds:
            if r.strategy == "none":
                why = f" ({r.reason})" if r.reason else ""
                out.append(f"round {r.round}: a forced compaction ended with strategy='none'{why}")
            if not r.within:
                out.append(f"round {r.round}: {r.tokens_after} tokens over the soft threshold without over_budget")
            if self.chain == "forced" and previous is not None:
                if r.tokens_after > r.tokens_before:
                    out.append(f"round {r.round}: returned {r.tokens_after} tokens for {r.tokens_before}")
                grown = (r.ledger_chars or 0) - (previous.ledger_chars or 0)
                if grown > r.ledger_allowance:
                    out.append(
                        f"round {r.round}: the ledger grew by {grown} chars with {r.ledger_allowance} of new input"
                    )
            previous = r
        if self.error:
            out.append(self.error)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "chain": self.chain,
            "summarizer": self.summarizer,
            "budget": self.budget,
            "window": self.window,
            "items": [vars(c) for c in self.canaries],
            "rounds": [r.to_dict() for r in self.rounds],
            "problems": self.problems(),
            "error": self.error,
        }


def chain_config(tokens: int, budget: float | None, fields: Mapping[str, Any] | None = None) -> CompactionConfig:
    """The config of a chain: a window of ``budget`` x the conversation's tokens (at least
    :data:`MIN_WINDOW`), or with ``budget=None`` one so large that nothing must be evicted (the
    ledger's budgets raised to hold every word of the conversation); never refused
    (``min_savings_ratio=0``). ``fields``: other :class:`CompactionConfig` fields under those
    (a ``--config`` TOML table, e.g. ``details_budget_tokens = 400``)."""
    base = dict(fields or {})
    if budget is not None:
        window = max(MIN_WINDOW, int(tokens * budget))
        return CompactionConfig.from_dict({**base, "max_context_tokens": window, "min_savings_ratio": 0})
    window = max(CompactionConfig().max_context_tokens, UNBUDGETED_FACTOR * tokens)
    cfg = CompactionConfig.from_dict({**base, "max_context_tokens": window, "min_savings_ratio": 0})
    for name in ("user_messages_budget_tokens", "details_budget_tokens"):
        # A field this version does not have is left out.
        with contextlib.suppress(ConfigError, TypeError):
            cfg = cfg.replace(**{name: tokens})
    return cfg


def slices(messages: Sequence[Any], fmt: str, rounds: int) -> list[int]:
    """Where a growing chain's rounds end: ``rounds`` indices in order (the last one is the end),
    each just before a model call, so every prefix is a context an agent would send."""
    calls = [i for i in model_calls(messages, fmt) if i > 1] or [len(messages)]
    ends = []
    for r in range(1, rounds):
        want = len(messages) * r / rounds
        ends.append(min(calls, key=lambda i: (abs(i - want), i)))
    ends.append(len(messages))
    # A conversation with fewer model calls than rounds repeats an end: that round adds nothing.
    return sorted(ends)


def _found(canary: Any, text: str) -> bool:
    """A canary is there when its exact sentence is."""
    return bool(canary.text in text)


def _listed(canary: Any, missing: Sequence[str]) -> bool:
    """A lost canary is listed when an entry of ``must_keep_missing`` names its token."""
    return any(canary.token in m for m in missing)


def run_chain(
    transcript: Transcript,
    canaries: Sequence[Any],
    *,
    chain: str,
    config: CompactionConfig,
    summarizer: Callable[..., Any] | None,
    summarizer_name: str,
    budget: str,
    rounds: int = 5,
    found: Callable[[Any, str], bool] = _found,
    listed: Callable[[Any, Sequence[str]], bool] = _listed,
) -> ChainRun:
    """Run one chain (see the module note) and score every round. ``canaries`` may be any items
    with ``text`` and ``index`` (the message that says them): ``found(item, haystack)`` says
    whether one is in a context, ``listed(item, missing)`` whether ``must_keep_missing`` names it."""
    compactor = ContextCompactor(config, summarizer=summarizer)
    fmt = transcript.format
    run = ChainRun(
        transcript.path or "<transcript>", chain, summarizer_name, budget, config.max_context_tokens, list(canaries)
    )
    ends = slices(transcript.messages, fmt, rounds) if chain == "growing" else [len(transcript.messages)] * rounds
    context: list[Any] = []
    system = transcript.system
    upto = 0
    missing: list[str] = []
    for r, end in enumerate(ends, 1):
        context = (
            [*context, *transcript.messages[upto:end]]
            if chain == "growing"
            else (context if r > 1 else list(transcript.messages))
        )
        upto = end
        t0 = time.perf_counter()
        try:
            result = compactor.compact(context, system=system, tools=transcript.tools, format=fmt, force=True)
        except Exception as e:
            run.error = f"round {r}: {type(e).__name__}: {e}"
            break
        seconds = time.perf_counter() - t0
        allowance = growth_allowance(context, result.messages)
        context, system = list(result.messages), result.system
        missing += result.must_keep_missing
        text = haystack(context, system)
        said = [c.index < upto for c in canaries]
        kept = [s and found(c, text) for c, s in zip(canaries, said, strict=True)]
        named = [s and not k and listed(c, missing) for c, s, k in zip(canaries, said, kept, strict=True)]
        # A round that made no summary left the earlier one (and its ledger) in place.
        ledger = ledger_text(result.summary) if result.summary else None
        ledger_chars = len(ledger) if ledger is not None else (run.rounds[-1].ledger_chars if run.rounds else None)
        run.rounds.append(
            ChainRound.of(
                result,
                config.soft_threshold,
                round=r,
                said=said,
                kept=kept,
                listed=named,
                ledger_chars=ledger_chars,
                fake_in_ledger=(ledger or "").count(FAKE_ENTRY),
                ledger_allowance=allowance,
                fake_entries=text.count(FAKE_ENTRY),
                seconds=seconds,
            )
        )
    return run
