"""The CI subset of the sweep over the corpus converted into Gemini ``contents`` (``tests/sweep_gemini.py``):
every conversation as dicts and as ``google.genai.types.Content`` (half of them without call ids), the
same grid and oracle as ``tests/test_sweep.py`` plus Gemini's own checks, and the must-keep recall
within one point of the same conversations in their original format."""

from __future__ import annotations

import pytest

pytest.importorskip("google.genai", reason="google-genai is not installed (the [gemini] extra)")

import sweep
import sweep_gemini
from conftest import corpus_or_skip


@pytest.fixture(scope="module")
def tallies() -> tuple[sweep.Tally, sweep.Tally]:
    corpus_or_skip()
    gemini = sweep_gemini.run("both", sweep.CI)
    original = sweep.sweep(sweep.load_cases(), sweep.CI)
    return gemini, original


def test_every_conversation_is_swept_as_dicts_and_types(tallies: tuple[sweep.Tally, sweep.Tally]) -> None:
    gemini, _ = tallies
    names = {key.rsplit("/", 1)[0] for key in gemini.file_facts}
    assert any(n.endswith("#dicts") for n in names) and any(n.endswith("#types") for n in names)
    assert gemini.chains > 0 and gemini.compactions > 2000


@pytest.mark.parametrize("kind", [*sweep.KINDS, *sweep_gemini.GEMINI_KINDS])
def test_no_violations(tallies: tuple[sweep.Tally, sweep.Tally], kind: str) -> None:
    gemini, _ = tallies
    n = gemini.counts.get(kind, 0)
    assert n == 0, f"{n} compactions: {kind}; e.g. {gemini.examples.get(kind, [])[:3]}"


def test_no_chain_loses_the_task(tallies: tuple[sweep.Tally, sweep.Tally]) -> None:
    gemini, _ = tallies
    assert gemini.chains_lost_task == 0


@pytest.mark.parametrize("share", sweep.CI.shares)
@pytest.mark.parametrize("summarizer", sweep.CI.summarizers)
def test_recall_within_one_point_of_the_original_format(
    tallies: tuple[sweep.Tally, sweep.Tally], share: float, summarizer: str
) -> None:
    gemini, original = tallies
    kept, total = gemini.recall(share, summarizer)
    base_kept, base_total = original.recall(share, summarizer)
    assert total > 0 and base_total > 0
    assert kept / total >= base_kept / base_total - 0.01, (kept, total, base_kept, base_total)
