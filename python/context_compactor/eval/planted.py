"""Canary survival in the eval's replays: what an agent loop sees of the user's words.

The canary grid (:mod:`.grid`) compacts with ``compact(force=True)`` and no
:class:`~context_compactor.ConversationState`, so whatever depends on the state (the growth a
``target_ratio="auto"`` reads, the hold after an ``over_budget`` compaction) is invisible there.
Here the same canaries (:func:`.canaries.canaries_for`, planted by :func:`.canaries.plant`: five
kinds, English and Chinese, imperative/conditional/every forms, top/middle/bottom) go into a copy
of each transcript, and the copy is replayed exactly as the eval replays the original
(:func:`context_compactor.replay.replay`: a Session, ``check()`` and then a compaction when it is
due, before every model call, the state recording growth and each result) at the eval's window.
After each compaction the canaries said so far are looked for by the grid's own judge (the exact
sentence in some string of the context: :func:`.chains._found`, nothing of the core's
classifier); a lost one named by no ``must_keep_missing`` so far is a silent loss.

Each policy (the eval's policy, its baseline, and the defaults when the policy is not them)
replays the same planted copy. These are separate replays: the eval's own figures come from the
unplanted transcripts and do not move. A round is a compaction (the first, the second, ...); a
replay with fewer compactions counts its last one for the later rounds, as the grid does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from context_compactor.compactor import ContextCompactor
from context_compactor.config import CompactionConfig
from context_compactor.eval.canaries import KINDS, POSITIONS, Canary, canaries_for, plant
from context_compactor.eval.chains import ChainRound, ChainRun, _found, _listed
from context_compactor.eval.facts import haystack
from context_compactor.eval.ledger_view import ledger_text
from context_compactor.io import Transcript
from context_compactor.replay import ReplayCall, replay

__all__ = ["ROUNDS", "below", "planted_copy", "planted_replay", "survival"]

#: Rounds (compactions) shown one by one; ``all`` sums every compaction.
ROUNDS = 5


def planted_copy(transcript: Transcript, slot: int) -> tuple[Transcript, list[Canary]]:
    """The transcript with its canaries planted (the grid's canaries for the same name and slot)."""
    return plant(transcript, canaries_for(transcript.path or f"<transcript {slot}>", slot))


def planted_replay(
    planted: Transcript,
    canaries: Sequence[Canary],
    config: CompactionConfig,
    *,
    policy: str,
    summarizer: Callable[..., Any] | None = None,
    found: Callable[[Any, str], bool] = _found,
) -> ChainRun:
    """Replay ``planted`` as the eval does (a Session, ``check()`` then a compaction when due, with
    its :class:`ConversationState`) under ``config`` and score the canaries after every compaction.
    The run's ``chain`` is ``"replay"`` and its ``summarizer`` field holds ``policy``."""
    compactor = ContextCompactor(config, summarizer=summarizer)
    run = ChainRun(planted.path or "<transcript>", "replay", policy, policy, config.max_context_tokens, list(canaries))
    missing: list[str] = []

    def on_call(call: ReplayCall) -> None:
        result = call.result
        if result is None:
            return
        missing.extend(result.must_keep_missing)
        text = haystack(call.messages, call.system)
        said = [c.index < call.message_index for c in canaries]
        kept = [s and found(c, text) for c, s in zip(canaries, said, strict=True)]
        named = [s and not k and _listed(c, missing) for c, s, k in zip(canaries, said, kept, strict=True)]
        ledger = ledger_text(result.summary) if result.summary else None
        run.rounds.append(
            ChainRound.of(
                result,
                config.soft_threshold,
                round=len(run.rounds) + 1,
                said=said,
                kept=kept,
                listed=named,
                ledger_chars=len(ledger) if ledger is not None else None,
                ledger_allowance=0,
                fake_in_ledger=0,
                fake_entries=0,
                seconds=0.0,
                call=call.turn,
            )
        )

    t0 = time.perf_counter()
    try:
        replay(planted, compactor, on_call=on_call)
    except Exception as e:  # a crash is reported with the run, not raised over the eval
        run.error = f"replay: {type(e).__name__}: {e}"
    if run.rounds:
        run.rounds[-1].seconds = time.perf_counter() - t0
    return run


def _count(runs: Iterable[ChainRun], rounds: Callable[[ChainRun], Sequence[ChainRound]], **by: str) -> list[int]:
    """[said, kept, silent] over the given rounds of ``runs``, canaries filtered by kind/position."""
    said = kept = silent = 0
    for run in runs:
        for r in rounds(run):
            for i, c in enumerate(run.canaries):
                if not r.said[i] or any(getattr(c, k) != v for k, v in by.items()):
                    continue
                said += 1
                kept += r.kept[i]
                silent += not r.kept[i] and not r.listed[i]
    return [said, kept, silent]


def _share(c: Sequence[int]) -> float | None:
    return c[1] / c[0] if c[0] else None


def _every(run: ChainRun) -> Sequence[ChainRound]:
    return run.rounds


def _nth(k: int) -> Callable[[ChainRun], Sequence[ChainRound]]:
    return lambda run: run.rounds[min(k, len(run.rounds)) - 1 : min(k, len(run.rounds))]


def survival(runs: Sequence[ChainRun], rounds: int = ROUNDS) -> dict[str, Any]:
    """Canary survival over ``runs`` (one policy's): ``share`` and ``items`` ([kept, said]) over
    every compaction; ``by_round`` (compactions 1..``rounds``, a replay with fewer counting its
    last one), ``by_kind`` and ``by_position`` (every compaction); ``silent`` (lost and in no
    ``must_keep_missing``, canary x compaction); ``compactions``; ``mean_target``."""
    every = _count(runs, _every)
    targets = [r.target_ratio for run in runs for r in run.rounds if r.target_ratio is not None]
    return {
        "share": _share(every),
        "items": [every[1], every[0]],
        "by_round": [_share(_count(runs, _nth(k))) for k in range(1, rounds + 1)],
        "by_kind": {k: _share(_count(runs, _every, kind=k)) for k in KINDS},
        "by_position": {p: _share(_count(runs, _every, position=p)) for p in POSITIONS},
        "silent": every[2],
        "compactions": sum(len(run.rounds) for run in runs),
        "mean_target": sum(targets) / len(targets) if targets else None,
        "errors": [run.error for run in runs if run.error],
    }


def below(transcripts: Iterable[Any], policy: str = "policy", other: str = "baseline", least: int = 20) -> list[Any]:
    """The transcripts (``TranscriptEval``) with at least ``least`` canary items for ``policy``
    where its canary survival is below ``other``'s (issue 28's rule, per transcript)."""
    out = []
    for t in transcripts:
        if policy in t.canaries and other in t.canaries:
            a, b = survival([t.canaries[policy]]), survival([t.canaries[other]])
            if a["items"][1] >= least and b["share"] is not None and (a["share"] or 0.0) < b["share"]:
                out.append(t)
    return out
