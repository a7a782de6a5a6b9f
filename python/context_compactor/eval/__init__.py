"""``evaluate()``: what an agent keeps through compaction and what its conversation costs.

Each transcript is replayed as an agent would send it (:func:`context_compactor.replay.replay`:
a Session, :meth:`~Session.prepare` before every assistant message) at a window of ``max_tokens``
or ``window_ratio`` x the transcript's own size. At every compaction the context about to be sent
is scored by probes computed in Python from the raw transcript up to that point
(:mod:`.probes`, :mod:`.facts`; nothing from the Rust summary code, no LLM):

- ``recall``: the must-keep facts (paths, URLs, error names) of every earlier message are in
  the context; one missing that no compaction so far listed in ``must_keep_missing`` is counted
  in ``silent_facts`` (dropped without a word);
- ``artifact_trail``: every file created, edited, moved or deleted so far is named, with its
  last operation (the call that made it is still there, or a line names the path with a word
  for the operation);
- ``constraints``: every imperative sentence of the user's is there verbatim;
- ``continuation``: the open items of the latest to-do list and the last unresolved error;
- ``growth``: the summary's narrative (without the ledger it carries verbatim, which has its own
  budgets: :mod:`.ledger_view`) is at most ``summary_max_tokens`` and does not grow at every one
  of five or more chained compactions to 4x its first size (a ratchet); and at every compaction
  the context compacted again with nothing new (forced, rule summary) keeps its ledger from
  growing and its tokens from rising (DESIGN's invariant 8).

The billed input of every call is simulated (:mod:`.cost`) under each price table, for the
policy, for the ``baseline`` config, for plain truncation (the oldest messages after the task
dropped at legal cut points, down to the target, when the context passes the soft threshold)
and for no compaction (the whole prefix each call; ``fits`` says whether it ever passes the
window). ``EvalReport.to_dict()`` is the JSON; :mod:`context_compactor._html_report` draws it.

Example:
    >>> from context_compactor.eval import evaluate
    >>> report = evaluate(["examples/agent_session.json"], max_tokens=3000)
    >>> report.overall("policy")["artifact_trail"]
    1.0
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from context_compactor import _core
from context_compactor.compactor import ContextCompactor
from context_compactor.config import CompactionConfig
from context_compactor.eval.chains import ChainRun
from context_compactor.eval.cost import PRICES, PriceTable, Prompt, simulate
from context_compactor.eval.facts import haystack, message_facts
from context_compactor.eval.ledger_view import growth_allowance, ledger_text, narrative
from context_compactor.eval.planted import below, planted_copy, planted_replay, survival
from context_compactor.eval.probes import (
    artifact_trail,
    constraints,
    continuation,
    normalize,
    op_shown,
    tool_calls,
)
from context_compactor.io import Transcript, load
from context_compactor.replay import ReplayCall, model_calls, replay

__all__ = ["PROBES", "EvalReport", "PolicyRun", "ProbeScore", "TranscriptEval", "evaluate"]

#: The probes, in report order.
PROBES = ("recall", "artifact_trail", "constraints", "continuation", "growth")
#: The smallest window ``window_ratio`` gives (a tiny transcript at 10% would not hold its task).
MIN_WINDOW = 1500
#: A ratchet: a summary that grew at every one of at least this many chained compactions, to
#: this many times its first size (the 8.6x over 5 compactions users reported).
RATCHET_MIN_CHAIN = 5
RATCHET_GROWTH = 4.0
#: A compaction within this many calls of one that ended ``over_budget`` or was refused, below
#: the hard threshold, is a loop.
LOOP_CALLS = 3


@dataclass
class ProbeScore:
    """Items kept and items expected, summed over the compactions; ``missed`` lists a few."""

    kept: int = 0
    total: int = 0
    missed: list[str] = field(default_factory=list)

    def add(self, ok: bool, item: str) -> None:
        self.total += 1
        if ok:
            self.kept += 1
        elif len(self.missed) < 8 and item not in self.missed:
            self.missed.append(item)

    def merge(self, other: ProbeScore) -> None:
        self.kept += other.kept
        self.total += other.total

    @property
    def share(self) -> float | None:
        return self.kept / self.total if self.total else None


@dataclass
class PolicyRun:
    """One policy's replay of one transcript: probe scores, per-call sizes, cost."""

    name: str
    probes: dict[str, ProbeScore] = field(default_factory=lambda: {p: ProbeScore() for p in PROBES})
    tokens: list[int] = field(default_factory=list)
    compacted_calls: list[int] = field(default_factory=list)
    summary_tokens: list[int] = field(default_factory=list)
    summary_cap: int | None = None
    ratchet: bool = False
    prefix_stability: float | None = None
    valid: bool | None = None
    fits: bool = True
    cost: dict[str, float] = field(default_factory=dict)
    cost_per_call: dict[str, list[float]] = field(default_factory=dict)
    cached_share: dict[str, float | None] = field(default_factory=dict)
    #: Must-keep facts missing at a compaction that no ``must_keep_missing`` so far named.
    silent_facts: int = 0
    listed: set[str] = field(default_factory=set, repr=False)
    #: Calls counted by :attr:`changed_share` (those where even the smallest legal context is over
    #: the soft threshold left out), and those of them whose compaction changed the context.
    eligible_calls: int = 0
    changed_calls: int = 0
    #: Compaction loops: calls that compacted again within :data:`LOOP_CALLS` calls of a
    #: compaction that ended ``over_budget`` or was refused, without crossing the hard threshold.
    loops: int = 0
    #: The target of each compaction, as a share of the budget (``target_ratio="auto"`` chooses
    #: one per compaction).
    targets: list[float] = field(default_factory=list)

    @property
    def mean_target(self) -> float | None:
        """The mean target ratio over the compactions."""
        return sum(self.targets) / len(self.targets) if self.targets else None

    @property
    def changed_share(self) -> float | None:
        """The share of calls whose compaction changed the context, leaving out the calls where
        even the smallest legal context is over the soft threshold."""
        return self.changed_calls / self.eligible_calls if self.eligible_calls else None

    @property
    def compactions(self) -> int:
        return len(self.compacted_calls)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "probes": {
                k: {"kept": s.kept, "total": s.total, "share": s.share, "missed": s.missed}
                for k, s in self.probes.items()
            },
            "compactions": self.compactions,
            "compacted_calls": self.compacted_calls,
            "tokens_per_call": self.tokens,
            "summary_tokens": self.summary_tokens,
            "summary_cap": self.summary_cap,
            "ratchet": self.ratchet,
            "prefix_stability": self.prefix_stability,
            "valid": self.valid,
            "fits": self.fits,
            "cost": self.cost,
            "cost_per_call": self.cost_per_call,
            "cached_share": self.cached_share,
            "silent_facts": self.silent_facts,
            "changed_share": self.changed_share,
            "loops": self.loops,
            "targets": self.targets,
            "mean_target": self.mean_target,
        }


@dataclass
class TranscriptEval:
    """Every policy's run of one transcript."""

    file: str
    format: str
    messages: int
    transcript_tokens: int
    window: int
    runs: dict[str, PolicyRun] = field(default_factory=dict)
    seconds: float = 0.0
    #: Per policy, the replay of a planted copy (``evaluate(canaries=True)``, :mod:`.planted`).
    canaries: dict[str, ChainRun] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "file": self.file,
            "format": self.format,
            "messages": self.messages,
            "transcript_tokens": self.transcript_tokens,
            "window": self.window,
            "seconds": round(self.seconds, 3),
            "runs": {k: r.to_dict() for k, r in self.runs.items()},
        }
        if self.canaries:
            out["canaries"] = {k: {**survival([r]), "run": r.to_dict()} for k, r in self.canaries.items()}
        return out


@dataclass
class EvalReport:
    """The eval of every transcript; :meth:`overall` sums them."""

    transcripts: list[TranscriptEval] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    window_ratio: float | None = None
    max_tokens: int | None = None
    prices: dict[str, PriceTable] = field(default_factory=lambda: dict(PRICES))
    policies: tuple[str, ...] = ()
    seconds: float = 0.0
    #: The policies whose planted copies were replayed (``evaluate(canaries=True)``).
    canary_policies: tuple[str, ...] = ()

    def canary_survival(self, policy: str = "policy") -> dict[str, Any]:
        """Canary survival of ``policy`` over every transcript (:func:`.planted.survival`)."""
        return survival([t.canaries[policy] for t in self.transcripts if policy in t.canaries])

    def overall(self, policy: str = "policy") -> dict[str, Any]:
        """Per probe the share kept (0..1, ``None`` when nothing was expected), summed over every
        compaction of every transcript; the cost per price table; the cache-prefix stability
        (mean over transcripts); growth's worst case."""
        out: dict[str, Any] = {}
        for p in PROBES:
            s = ProbeScore()
            for t in self.transcripts:
                if policy in t.runs:
                    s.merge(t.runs[policy].probes[p])
            out[p] = s.share
            out[f"{p}_items"] = [s.kept, s.total]
        runs = [t.runs[policy] for t in self.transcripts if policy in t.runs]
        out["cost"] = {k: sum(r.cost.get(k, 0.0) for r in runs) for k in self.prices}
        stab = [r.prefix_stability for r in runs if r.prefix_stability is not None]
        out["prefix_stability"] = sum(stab) / len(stab) if stab else None
        out["compactions"] = sum(r.compactions for r in runs)
        out["max_summary_tokens"] = max((max(r.summary_tokens, default=0) for r in runs), default=0)
        out["ratchets"] = sum(1 for r in runs if r.ratchet)
        out["valid"] = all(r.valid is not False for r in runs)
        out["silent_facts"] = sum(r.silent_facts for r in runs)
        eligible = sum(r.eligible_calls for r in runs)
        out["changed_share"] = sum(r.changed_calls for r in runs) / eligible if eligible else None
        out["loop_transcripts"] = sum(1 for r in runs if r.loops)
        targets = [x for r in runs for x in r.targets]
        out["mean_target"] = sum(targets) / len(targets) if targets else None
        return out

    def to_dict(self) -> dict[str, Any]:
        base = {p: self.overall(p) for p in self.policies}
        return {
            "window_ratio": self.window_ratio,
            "max_tokens": self.max_tokens,
            "prices": {k: vars(v) for k, v in self.prices.items()},
            "policies": list(self.policies),
            "overall": base.get("policy", {}),
            "by_policy": base,
            "transcripts": [t.to_dict() for t in self.transcripts],
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "seconds": round(self.seconds, 2),
            **(
                {
                    "canaries": {p: self.canary_survival(p) for p in self.canary_policies},
                    "canaries_below_baseline": [t.file for t in below(self.transcripts)],
                }
                if self.canary_policies
                else {}
            ),
        }


# -- the runs -------------------------------------------------------------------------------------------------------


def _summary_proper(text: str) -> str:
    """The summary without its ledger (the user's words, preserved details, artifact trail: they
    have their own budgets), read by :func:`.ledger_view.narrative`."""
    return narrative(text)


def _recompacted_ledger(config: CompactionConfig, call: ReplayCall, fmt: str) -> tuple[bool, str]:
    """Compact the context just compacted again, forced, with nothing new (rule summary,
    ``min_savings_ratio=0``): its ledger grows by no more than the text of the messages the
    second compaction moved into the summary (not at all when it moved none), and its tokens do
    not rise (DESIGN's invariant 8). Returns (held, what broke)."""
    assert call.result is not None
    before = ledger_text(call.result.summary or "")
    again = ContextCompactor(config.replace(min_savings_ratio=0)).compact(
        call.messages, system=call.system, tools=call.tools, format=fmt, force=True
    )
    after = ledger_text(again.summary or "")
    if len(after) > len(before) + growth_allowance(call.messages, again.messages):
        return False, f"ledger grew with nothing new at call {call.turn}: {len(before)} -> {len(after)} chars"
    if again.tokens_after > again.tokens_before:
        return (
            False,
            f"re-compaction at call {call.turn} returned {again.tokens_after} tokens for {again.tokens_before}",
        )
    return True, ""


def _fixed_key(system: Any, tools: Any) -> str:
    return json.dumps([system, tools], sort_keys=True, ensure_ascii=False, default=str)


def _call_ids(messages: Iterable[Any]) -> set[str]:
    return {c.id for c in tool_calls(list(messages)) if c.id}


class _Loops:
    """Follows one policy's calls for :attr:`PolicyRun.changed_share` and :attr:`PolicyRun.loops`.

    Whether even the smallest legal context is over the soft threshold is read from the
    compactions themselves: a compaction that was due and ended ``over_budget`` found it so
    (DESIGN invariant 5: ``over_budget`` only then); that holds for the calls after it until one
    gets under the soft threshold (the context only grows in between)."""

    def __init__(self, run: PolicyRun, config: CompactionConfig) -> None:
        self.run = run
        self.hard = config.hard_threshold
        self.soft = config.soft_threshold
        self.stuck_at: int | None = None  # the call of the last compaction that could not fit
        self.smallest_over = False

    def call(self, call: ReplayCall) -> None:
        attempt = call.attempt
        changed = call.result is not None
        if attempt is not None and (attempt.reason or "").startswith("held:"):
            attempt = None  # held back (retry_growth_tokens): no compaction was attempted
        if attempt is not None:
            refused = not attempt.changed and "min_savings_ratio" in (attempt.reason or "")
            stuck = attempt.over_budget or refused
            if changed and self.stuck_at is not None and call.turn - self.stuck_at <= LOOP_CALLS:
                self.run.loops += attempt.tokens_before < self.hard
            if attempt.changed or refused or attempt.over_budget:
                self.smallest_over = attempt.over_budget
            if stuck:
                self.stuck_at = call.turn
        elif call.tokens < self.soft:
            self.smallest_over = False
        if not self.smallest_over:
            self.run.eligible_calls += 1
            self.run.changed_calls += changed


class _Probe:
    """The probes of one transcript, computed once per prefix and reused across policies."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self._facts: list[list[str]] = [message_facts(m) for m in messages]
        self._cache: dict[int, tuple[list[str], Any, list[str], Any]] = {}

    def expected(self, i: int) -> tuple[list[str], Any, list[str], Any]:
        hit = self._cache.get(i)
        if hit is None:
            prefix = self.messages[:i]
            facts = list(dict.fromkeys(f for fs in self._facts[:i] for f in fs))
            hit = (facts, artifact_trail(prefix), constraints(prefix), continuation(prefix))
            self._cache[i] = hit
        return hit

    def score(self, run: PolicyRun, call: ReplayCall) -> None:
        facts, trail, cons, cont = self.expected(call.message_index)
        text = haystack(call.messages, call.system)
        flat = normalize(text)
        ids = _call_ids(call.messages)
        if call.result is not None:
            run.listed.update(call.result.must_keep_missing)
        for f in facts:
            run.probes["recall"].add(f in text, f)
            # Dropped without a word: no compaction so far listed it in must_keep_missing.
            run.silent_facts += f not in text and f not in run.listed
        for a in trail:
            run.probes["artifact_trail"].add(a.path in text and op_shown(a, text, ids), f"{a.path} ({a.op})")
        for c in cons:
            run.probes["constraints"].add(c in flat, c)
        for t in cont.todos:
            run.probes["continuation"].add(t in flat, f"todo: {t}")
        if cont.error:
            run.probes["continuation"].add(cont.error in flat, f"error: {cont.error}")


def _run_policy(
    name: str,
    transcript: Transcript,
    config: CompactionConfig,
    summarizer: Callable[..., Any] | None,
    probe: _Probe,
    prices: Mapping[str, PriceTable],
) -> PolicyRun:
    compactor = ContextCompactor(config, summarizer=summarizer)
    run = PolicyRun(name, summary_cap=config.summary_max_tokens)
    prompts: list[Prompt] = []
    counter = compactor.counter
    loops = _Loops(run, config)

    def on_call(call: ReplayCall) -> None:
        loops.call(call)
        counts = counter.count_each(call.messages, system=call.system, tools=call.tools, format=transcript.format)
        prompts.append(
            Prompt(
                _fixed_key(call.system, call.tools),
                counts.system + counts.tools,
                tuple(call.ids),
                tuple(counts.messages),
            )
        )
        run.tokens.append(call.tokens)
        if call.result is not None:
            run.compacted_calls.append(call.turn)
            if call.result.target_ratio is not None:
                run.targets.append(call.result.target_ratio)
            if call.result.summary:
                run.summary_tokens.append(counter.count(_summary_proper(call.result.summary)))
                held, why = _recompacted_ledger(config, call, transcript.format)
                run.probes["growth"].add(held, why)
            probe.score(run, call)

    report = replay(transcript, compactor, on_call=on_call)
    run.prefix_stability = report.prefix_stability
    run.valid = report.valid
    run.fits = not report.over_window_turns
    cap = config.summary_max_tokens
    for n in run.summary_tokens:
        run.probes["growth"].add(n <= cap, f"summary of {n} tokens over the cap {cap}")
    s = run.summary_tokens
    run.ratchet = (
        len(s) >= RATCHET_MIN_CHAIN and all(b > a for a, b in itertools.pairwise(s)) and s[-1] >= RATCHET_GROWTH * s[0]
    )
    if run.ratchet:
        run.probes["growth"].add(False, "the summary grew at every compaction")
    _bill(run, prompts, prices)
    return run


def _bill(run: PolicyRun, prompts: list[Prompt], prices: Mapping[str, PriceTable]) -> None:
    for key, table in prices.items():
        cost = simulate(prompts, table)
        run.cost[key] = cost.dollars
        run.cost_per_call[key] = [c.dollars for c in cost.calls]
        run.cached_share[key] = cost.cached_share


def _static_runs(
    transcript: Transcript, config: CompactionConfig, prices: Mapping[str, PriceTable]
) -> tuple[PolicyRun, PolicyRun]:
    """No compaction (the whole prefix at each call) and plain truncation (drop the oldest
    messages after the task at legal cut points, down to the target, once past the soft
    threshold)."""
    messages, fmt = transcript.messages, transcript.format
    counter = ContextCompactor(config).counter
    counts = counter.count_each(messages, system=transcript.system, tools=transcript.tools, format=fmt)
    per = list(counts.messages)
    fixed = counts.system + counts.tools
    key = _fixed_key(transcript.system, transcript.tools)
    # The same model calls as the replay of the policy (``replay.model_calls``): for Responses
    # items each run of model output between tool outputs is a call, not only each assistant
    # message (the static runs billed 59 calls of the Codex rollout against the policy's 291).
    calls = model_calls(messages, fmt)
    structure = _core.analyze_conversation(messages, format=fmt)
    cuts = sorted(set(structure.cut_points))
    full = PolicyRun("no_compaction")
    trunc = PolicyRun("truncation")
    full_prompts: list[Prompt] = []
    trunc_prompts: list[Prompt] = []
    start = 1  # the first message kept after the task
    for i in calls:
        full_prompts.append(Prompt(key, fixed, tuple(range(i)), tuple(per[:i])))
        full.tokens.append(fixed + sum(per[:i]))
        size = fixed + (per[0] if i else 0) + sum(per[start:i])
        if size > config.soft_threshold:
            # Drop from the front to the first legal cut that brings the context to the target.
            for c in cuts:
                if c <= start or c > i:
                    continue
                start = c
                if fixed + per[0] + sum(per[start:i]) <= config.target_tokens:
                    break
            trunc.compacted_calls.append(len(trunc.tokens))
        keys = (0, *range(start, i)) if i else ()
        toks = (per[0], *per[start:i]) if i else ()
        trunc_prompts.append(Prompt(key, fixed, keys, toks))
        trunc.tokens.append(fixed + sum(toks))
    full.fits = all(t <= config.budget for t in full.tokens)
    trunc.fits = all(t <= config.budget for t in trunc.tokens)
    _bill(full, full_prompts, prices)
    _bill(trunc, trunc_prompts, prices)
    return full, trunc


def _window(tokens: int, max_tokens: int | None, window_ratio: float | None) -> int:
    if max_tokens is not None:
        return max_tokens
    if window_ratio is not None:
        return max(MIN_WINDOW, int(tokens * window_ratio))
    return CompactionConfig().max_context_tokens


def evaluate(
    files: Iterable[str | os.PathLike[str] | Transcript],
    *,
    max_tokens: int | None = None,
    window_ratio: float | None = None,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    baseline: CompactionConfig | Mapping[str, Any] | None = None,
    summarizer: Callable[..., Any] | None = None,
    prices: Mapping[str, PriceTable] | None = None,
    progress: TextIO | None = None,
    canaries: bool = False,
) -> EvalReport:
    """Replay each transcript under the policy (``config``, the library's defaults when
    ``None``) and the ``baseline`` config, score the probes at every compaction, and bill every
    call (see the module note).

    Args:
        files: Transcript files (anything :func:`io.load` reads) or loaded transcripts. A file
            that cannot be read is listed in ``report.skipped`` with the reason.
        max_tokens: The window (``max_context_tokens``) for every transcript.
        window_ratio: Or the window as a share of each transcript's own tokens (at least
            :data:`MIN_WINDOW`).
        config: The policy's config (its window is replaced).
        baseline: A second config run the same way (``"baseline"`` in the report).
        summarizer: The summarizer of both (default: the rule summary).
        prices: Price tables (default :data:`~context_compactor.eval.cost.PRICES`).
        progress: A stream for one line per transcript.
        canaries: Also replay a copy of each transcript with canaries planted under the policy,
            the baseline and (when the policy is not them) the defaults, at the same window
            (:mod:`.planted`; ``report.canary_survival(policy)``). The other figures do not move.

    Returns:
        The :class:`EvalReport`.
    """
    if max_tokens is not None and window_ratio is not None:
        raise ValueError("give either max_tokens or window_ratio, not both")
    if window_ratio is not None and not 0 < window_ratio <= 1:
        raise ValueError(f"window_ratio: expected a share in (0, 1], got {window_ratio}")
    t0 = time.perf_counter()
    tables = dict(prices or PRICES)
    policy_cfg = _as_config(config)
    baseline_cfg = _as_config(baseline) if baseline is not None else None
    report = EvalReport(window_ratio=window_ratio, max_tokens=max_tokens, prices=tables)
    report.policies = ("policy", *(("baseline",) if baseline_cfg else ()), "truncation", "no_compaction")
    planted_cfgs = {"policy": policy_cfg, **({"baseline": baseline_cfg} if baseline_cfg else {})}
    defaults = CompactionConfig(tokenizer=policy_cfg.tokenizer)
    if policy_cfg.replace(max_context_tokens=MIN_WINDOW) != defaults.replace(max_context_tokens=MIN_WINDOW):
        planted_cfgs["defaults"] = defaults
    report.canary_policies = tuple(planted_cfgs) if canaries else ()
    for slot, f in enumerate(files):
        t1 = time.perf_counter()
        try:
            transcript = f if isinstance(f, Transcript) else load(f)
        except (OSError, ValueError) as e:
            report.skipped.append((os.fspath(f) if not isinstance(f, Transcript) else str(f.path), str(e)))
            continue
        name = transcript.path or "<transcript>"
        counter = ContextCompactor(policy_cfg).counter
        total = counter.count_each(
            transcript.messages, system=transcript.system, tools=transcript.tools, format=transcript.format
        ).total
        window = _window(total, max_tokens, window_ratio)
        te = TranscriptEval(name, transcript.format, len(transcript.messages), total, window)
        probe = _Probe(list(transcript.messages))
        cfg = policy_cfg.replace(max_context_tokens=window)
        te.runs["policy"] = _run_policy("policy", transcript, cfg, summarizer, probe, tables)
        if baseline_cfg is not None:
            bcfg = baseline_cfg.replace(max_context_tokens=window)
            te.runs["baseline"] = _run_policy("baseline", transcript, bcfg, summarizer, probe, tables)
        te.runs["no_compaction"], te.runs["truncation"] = _static_runs(transcript, cfg, tables)
        if canaries:
            planted, items = planted_copy(transcript, slot)
            for pol, c in planted_cfgs.items():
                te.canaries[pol] = planted_replay(
                    planted, items, c.replace(max_context_tokens=window), policy=pol, summarizer=summarizer
                )
        te.seconds = time.perf_counter() - t1
        report.transcripts.append(te)
        if progress is not None:
            progress.write(f"eval {os.path.basename(name)}: window {window:,}, {te.seconds:.1f} s\n")
            progress.flush()
    report.seconds = time.perf_counter() - t0
    return report


def _as_config(c: CompactionConfig | Mapping[str, Any] | None) -> CompactionConfig:
    if c is None:
        return CompactionConfig()
    if isinstance(c, CompactionConfig):
        return c
    return CompactionConfig.from_dict(c)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: context-compactor eval FILES...")
