"""The instruction chain probe: an instruction given in any user message of a real conversation
survives ten chained compactions verbatim, unless it was evicted (DESIGN's eviction order) and
the eviction is listed in ``must_keep_missing``.

The instructions are the eval's own reading of the user's messages (:func:`.probes.constraints`,
written apart from the core's classifier); each is looked for whitespace-collapsed (a sentence
split across lines in the message may come back on one line) in the whole request after every
round of a growing and a forced chain (:mod:`.chains`), unbudgeted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from context_compactor.eval.chains import CHAINS, ChainRun, chain_config, run_chain
from context_compactor.eval.probes import constraints, normalize
from context_compactor.io import Transcript
from context_compactor.tokens import TokenCounter

__all__ = ["Instruction", "instructions_of", "run_instruction_chains"]


@dataclass(frozen=True)
class Instruction:
    """An instruction of the user's: its sentence (whitespace collapsed), the message that says it
    first, where that is (``top``/``middle``/``bottom`` third) and ``kind="instruction"``."""

    text: str
    index: int
    position: str
    kind: str = "instruction"


def instructions_of(messages: Sequence[Any]) -> list[Instruction]:
    """Every instruction of the user's messages, at the message that says it first."""
    seen: dict[str, Instruction] = {}
    n = max(len(messages), 1)
    for i, m in enumerate(messages):
        for s in constraints([m]):
            if s not in seen:
                where = ("top", "middle", "bottom")[min(2, 3 * i // n)]
                seen[s] = Instruction(s, i, where)
    return list(seen.values())


def _found(item: Instruction, text: str) -> bool:
    return item.text in normalize(text)


def _listed(item: Instruction, missing: Sequence[str]) -> bool:
    return any(item.text in normalize(m) or (len(m) >= 8 and normalize(m) in item.text) for m in missing)


def run_instruction_chains(
    transcript: Transcript,
    *,
    summarizer: Callable[..., Any] | None,
    summarizer_name: str,
    chains: Sequence[str] = CHAINS,
    rounds: int = 10,
) -> list[ChainRun]:
    """A growing and a forced chain of ``rounds`` compactions of ``transcript`` (unbudgeted), every
    instruction scored at every round (``[]`` when the user gave none)."""
    items = instructions_of(transcript.messages)
    if not items:
        return []
    tokens = TokenCounter("approx").count_messages(
        transcript.messages, system=transcript.system, tools=transcript.tools, format=transcript.format
    )
    config = chain_config(tokens, None)
    return [
        run_chain(
            transcript,
            items,
            chain=ch,
            config=config,
            summarizer=summarizer,
            summarizer_name=summarizer_name,
            budget="unbudgeted",
            rounds=rounds,
            found=_found,
            listed=_listed,
        )
        for ch in chains
    ]
