"""DESIGN invariant 5 on the real corpus: every context a replay sends fits the window, or the
compaction says ``over_budget`` and the smallest legal context, computed independently in Python
(``tests/_smallest.py``), is over the soft threshold too (within a 10% margin for what that
estimate cannot know exactly: see its module docstring).

Grid: every corpus conversation (OpenAI files, Claude Code sessions as Anthropic requests with
their thinking, the Responses session) replayed at windows of 1,500, 2,000 and 3,000 tokens and
at 10% of its own size. ``make sweep`` runs a longer grid (``python tests/_smallest.py --full``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _smallest
from context_compactor import CompactionConfig, ContextCompactor
from context_compactor.io import load


@pytest.fixture(scope="module")
def outcome(corpus_dir: Path) -> _smallest.Outcome:
    return _smallest.run_grid(_smallest.WINDOWS, _smallest.corpus_files())


def test_the_grid_covers_the_corpus(outcome: _smallest.Outcome) -> None:
    assert len(_smallest.corpus_files()) >= 29
    assert outcome.calls > 4000
    # The swe-agent and tau-bench system prompts alone are over a 1,500-token window's soft
    # threshold: such calls exist and are flagged, not hidden.
    assert outcome.over_window


def test_no_context_over_the_window_without_over_budget(outcome: _smallest.Outcome) -> None:
    assert not outcome.unflagged, "\n".join(map(str, outcome.unflagged[:10]))


def test_over_budget_only_when_the_smallest_legal_context_is_over(outcome: _smallest.Outcome) -> None:
    assert not outcome.too_early, "\n".join(map(str, outcome.too_early[:10]))


def test_every_context_sent_is_valid_for_the_provider(outcome: _smallest.Outcome) -> None:
    # The cuts of the last block (arguments, results, text inside Anthropic's pending thinking
    # loop, Responses items) keep every rule the transcript kept (DESIGN invariant 1).
    assert not outcome.invalid, "\n".join(outcome.invalid[:10])


def test_a_last_block_with_long_arguments_is_cut_to_fit(corpus_dir: Path) -> None:
    """openhands basic_gui_mode at a 1,500-token window: the last block is a call whose
    arguments are 4,509 characters (an HTML file written) and its short result. The arguments of
    the call that ran are cut head + tail, named in the record, and the context fits."""
    path = corpus_dir / "openai" / "openhands__basic_gui_mode.json"
    t = load(path)
    compactor = ContextCompactor(CompactionConfig(max_context_tokens=1500))
    seen = []

    def on_call(call: object) -> None:
        seen.append(call)

    from context_compactor.replay import replay

    report = replay(t, compactor, on_call=on_call)
    assert not report.over_window_turns
    # The call before message 5: the context is the task, the summary and that last block.
    call = next(c for c in seen if c.message_index == 5)
    assert call.result is not None and not call.result.over_budget
    assert call.tokens <= compactor.config.soft_threshold
    entries = [e for e in call.result.record if "arguments of str_replace_editor" in e.detail]
    assert len(entries) == 1 and entries[0].action == "shortened"
    calls = [m for m in call.messages if isinstance(m, dict) and m.get("tool_calls")]
    args = calls[-1]["tool_calls"][0]["function"]["arguments"]
    assert "chars omitted" in args and len(args) < 4509


def test_an_image_the_user_just_sent_is_legitimately_over(corpus_dir: Path) -> None:
    """kimi-cli cc_29 at 10%: the newest user message holds two screenshots (5,894 tokens), over
    the soft threshold alone. An image cannot be shortened and the model must see what the user
    just sent: over_budget, the reason naming the images."""
    path = corpus_dir / "openai" / "kimi-cli-claude-code__cc_29_77bc73228c_1.json"
    t = load(path)
    window = _smallest.window_of(t, 0.1)
    compactor = ContextCompactor(CompactionConfig(max_context_tokens=window))
    from context_compactor.replay import replay

    reasons = []
    replay(t, compactor, on_call=lambda c: reasons.append(c.result.over_budget_reason) if c.result else None)
    over = [r for r in reasons if r]
    assert over and all("images" in r and "an image cannot be shortened" in r for r in over), over
