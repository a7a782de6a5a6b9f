"""Where the ledger sits on the budget ladder (DESIGN, invariants 5 and 8): its entries are evicted
only after the kept tail and the narrative's length have given what they can (the narrative down
to its continuation floor: the last unresolved error and the next open to-do items, which go only
after the ledger's evictable entries), and a forced
compaction of a context a compaction returned always compacts, carries every ledger entry and
never returns more tokens than it got, with the rule summary or a summarizer that writes too much."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from context_compactor import SUMMARY_MARKER, CompactionConfig, ContextCompactor, SummaryRequest
from context_compactor.eval.adversarial import adversarial_summarizer
from context_compactor.eval.canaries import canaries_for, plant
from context_compactor.eval.facts import haystack
from context_compactor.io import load
from test_ledger import RULE, SENTINEL, WHEN, conversation, ledger_of

#: SWE-agent and Claude Code runs whose windows at 20% leave the ledger little room (a 418-token
#: system prompt and a 300-token task in a 1,763-token window), and an OpenHands one.
FILES = [
    "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json",
    "openai/mini-swe-agent__test_github_issue.json",
    "claude-code/cc_08_60e52c3d41_2.jsonl",
    "openai/openhands__basic_gui_mode.json",
]


def verbose(request: SummaryRequest) -> str:
    """A summarizer that writes far more than it is asked for, every time."""
    return "<summary>" + "The agent kept working on the modules and read many files. " * 200 + "</summary>"


def _narrative(summary: str) -> str:
    """The text between the marker's line and the ledger's sentinel."""
    body = summary.split("\n", 1)[1] if "\n" in summary else ""
    return body[: body.index(SENTINEL)].strip()


#: The continuation floor's lines: its headings (English and Chinese), its items and the count of
#: the items left out.
FLOOR_LINE = re.compile(
    r"^(?:(?:Open to-do items|未完成的待办事项)[:：]?|(?:Last unresolved error|最近未解决的错误)[:：].*"
    r"|- .*|\(\+\d+\))$"
)


def _beyond_floor(summary: str) -> list[str]:
    """The narrative's lines that are not its continuation floor (at most one error line and
    three to-do items)."""
    lines = [x for x in _narrative(summary).splitlines() if x.strip()]
    items = [x for x in lines if x.startswith("- ")]
    errors = [x for x in lines if x.startswith(("Last unresolved error", "最近未解决的错误"))]
    extra = [x for x in lines if not FLOOR_LINE.match(x)]
    return extra + items[3:] + errors[1:]


@pytest.mark.parametrize("name", FILES)
def test_the_ledger_gives_only_after_the_narrative(corpus_dir: Path, name: str) -> None:
    """With the budgets out of the way (only the ladder evicts), a compaction that evicted any of
    the user's words left no narrative but its continuation floor: the narrative's length gave
    all it had first, down to the lines the agent needs to carry on."""
    t = load(corpus_dir / name)
    planted, canaries = plant(t, canaries_for(name, 0))
    total = ContextCompactor().counter.count_messages(
        planted.messages, system=planted.system, tools=planted.tools, format=planted.format
    )
    for share in (0.2, 0.3):
        cfg = CompactionConfig(
            max_context_tokens=max(1500, int(total * share)),
            min_savings_ratio=0,
            user_messages_budget_tokens=100_000,
            details_budget_tokens=100_000,
        )
        r = ContextCompactor(cfg).compact(
            planted.messages, system=planted.system, tools=planted.tools, format=planted.format, force=True
        )
        assert r.summary is not None and r.summary.startswith(SUMMARY_MARKER)
        text = haystack(list(r.messages), r.system)
        lost = [c for c in canaries if c.text not in text]
        assert all(any(c.token in m for m in r.must_keep_missing) for c in lost), (share, lost)
        if lost:
            assert _beyond_floor(r.summary) == [], (name, share, r.summary[:300])


def _chain(compactor: ContextCompactor, messages: list[Any], rounds: int) -> list[Any]:
    first = compactor.compact(messages, force=True)
    results = [first]
    ctx = list(first.messages)
    for _ in range(rounds):
        r = compactor.compact(ctx, force=True)
        results.append(r)
        ctx = list(r.messages)
    return results


@pytest.mark.parametrize("summarizer", [None, adversarial_summarizer, verbose], ids=["rule", "adversarial", "verbose"])
@pytest.mark.parametrize("window", [1_500, 2_500, 8_000])
def test_a_forced_recompaction_always_compacts_keeps_the_ledger_and_never_grows(summarizer: Any, window: int) -> None:
    """Invariant 8: compacting C again (forced, ``min_savings_ratio=0``, nothing new) keeps every
    ledger entry of C, only the narrative may change, and never returns more tokens than it got;
    it is a compaction (a summary), not ``strategy="none"``."""
    c = ContextCompactor(max_context_tokens=window, min_savings_ratio=0, summarizer=summarizer)
    results = _chain(c, conversation(), 4)
    assert RULE in ledger_of(results[0].summary) and WHEN in ledger_of(results[0].summary)
    for before, r in pairwise(results):
        assert r.strategy != "none", (r.strategy, r.reason)
        assert r.summary is not None and r.tokens_after <= r.tokens_before, (r.tokens_before, r.tokens_after)
        # Every entry of C's ledger is carried; a fact the rewritten narrative no longer names
        # joins the details (the adversarial summarizer drops every other one).
        assert set(ledger_of(before.summary).splitlines()) <= set(ledger_of(r.summary).splitlines())
        if summarizer is None:
            assert ledger_of(r.summary) == ledger_of(before.summary)
        assert not r.must_keep_missing


def test_a_summary_too_long_for_a_small_window_gives_way_before_the_users_words() -> None:
    """A summarizer whose narrative is twenty times what fits: the narrative is cut (said), the
    user's rule stays verbatim and nothing is evicted."""
    r = ContextCompactor(max_context_tokens=1_500, summarizer=verbose).compact(conversation(), force=True)
    assert RULE in ledger_of(r.summary) and WHEN in ledger_of(r.summary) and not r.must_keep_missing
    assert r.tokens_after <= CompactionConfig(max_context_tokens=1_500).soft_threshold
    assert r.summary_truncated


#: A system prompt longer than the whole window: whatever the compaction drops, the result is over
#: the hard threshold.
HUGE_SYSTEM = "You are a careful agent. Follow the house rules for every edit you make. " * 250


@pytest.mark.parametrize("summarizer", [None, adversarial_summarizer], ids=["rule", "adversarial"])
def test_over_budget_on_the_system_prompt_alone_keeps_the_ledger(summarizer: Any) -> None:
    """With the system prompt alone over the hard threshold, no eviction can bring the result
    within it: the compaction says it is over budget, and the user's words stay in the ledger and
    the facts in the summary (nothing is listed missing), here and in the next compaction."""
    c = ContextCompactor(max_context_tokens=3_000, min_savings_ratio=0, summarizer=summarizer)
    system = {"role": "system", "content": HUGE_SYSTEM}
    assert c.counter.count_messages([system]) > c.config.hard_threshold
    first = c.compact([system, *conversation()], force=True)
    again = c.compact(list(first.messages), force=True)
    for r in (first, again):
        assert r.over_budget and r.over_budget_reason and "system prompt" in r.over_budget_reason
        assert RULE in ledger_of(r.summary) and WHEN in ledger_of(r.summary)
        # Every fact is in the summary (the details hold those the narrative does not name).
        assert all(f"src/mod_{i}.py" in r.summary for i in range(9)), r.summary
        assert not r.must_keep_missing
    assert set(ledger_of(first.summary).splitlines()) <= set(ledger_of(again.summary).splitlines())


def test_ctf_rev_rock_at_30_percent_keeps_its_facts(corpus_dir: Path) -> None:
    """The SWE-agent CTF run whose system prompt and tools alone are over the hard threshold of a
    window of 30% of it: a forced compaction is over budget and keeps its two must-keep facts."""
    t = load(corpus_dir / "openai/swe-agent__ctf_rev_rock.json")
    c = ContextCompactor()
    total = c.counter.count_messages(t.messages, system=t.system, tools=t.tools, format=t.format)
    window = int(total * 0.3)
    c = ContextCompactor(max_context_tokens=window, reserve_tokens=window // 20)
    r = c.compact(t.messages, system=t.system, tools=t.tools, format=t.format, force=True)
    assert r.over_budget and r.over_budget_reason
    text = haystack(list(r.messages), r.system)
    assert {"./rock", "solve.py"} <= set(r.must_keep)
    assert [f for f in r.must_keep if f not in text] == [] and not r.must_keep_missing


def test_the_ledger_does_not_repeat_what_the_kept_task_shows(corpus_dir: Path) -> None:
    """A SWE-agent run whose task (a demonstration) and second message (the issue) share the
    template's rules: at a 30% window the task is cut and keeps those rules in its list of the
    user's constraints. The ledger does not carry them a second time, and the room goes to the
    user's later words: every planted canary survives, and every user sentence the ledger
    leaves out is still in the context, in a forced re-compaction too."""
    name = "openai/swe-agent__pydicom__pydicom-1458.json"
    t = load(corpus_dir / name)
    planted, canaries = plant(t, canaries_for(name, 0))
    total = ContextCompactor().counter.count_messages(
        planted.messages, system=planted.system, tools=planted.tools, format=planted.format
    )
    c = ContextCompactor(max_context_tokens=int(total * 0.3), min_savings_ratio=0)
    first = c.compact(planted.messages, system=planted.system, tools=planted.tools, format=planted.format, force=True)
    again = c.compact(list(first.messages), system=first.system, tools=planted.tools, format=planted.format, force=True)
    for r in (first, again):
        assert not r.over_budget and r.tokens_after <= c.config.soft_threshold
        text = haystack(list(r.messages), r.system)
        assert [x.text for x in canaries if x.text not in text] == []
        task = " ".join(str(r.messages[1]["content"]).split())
        assert task.startswith("Here is a demonstration") and "omitted]" in task, task[:200]
        words = [line[2:] for line in ledger_of(r.summary).splitlines() if line.startswith("> ")]
        repeated = [w for w in words if len(w) >= 24 and " ".join(w.split()) in task]
        assert repeated == [], repeated
        # The template's rules of the issue message are still there (in the kept task).
        assert "Then start trying to fix it." in task
        assert "Always check the code after you issue an edit to make sure that it reflects what you wanted" in task


#: Forty distinct sentences: far more narrative than a small window holds.
RAMBLE = " ".join(f"Step {i}: the agent read module {i} and noted its API." for i in range(40))


def rambling(request: SummaryRequest) -> str:
    return f"<summary>{RAMBLE}</summary>"


def test_an_llm_narrative_too_long_is_cut_at_its_sentences_not_replaced() -> None:
    """The narrative's length gives before any ledger entry (DESIGN, the ladder): an LLM's
    narrative that does not fit beside the ledger is cut at its last sentence that fits, and
    stays the LLM's (no fallback), marked truncated; the user's rules stay in the ledger."""
    c = ContextCompactor(max_context_tokens=2_500, summarizer=rambling)
    r = c.compact(conversation(), force=True)
    assert r.summary is not None and not r.over_budget
    assert (r.summary_source, r.strategy, r.fallback_reason) == ("llm", "summary", None), r
    assert r.summary_truncated and RULE in ledger_of(r.summary) and WHEN in ledger_of(r.summary)
    narrative = _narrative(r.summary)
    assert narrative and narrative.endswith("API.") and RAMBLE.startswith(narrative), narrative
    assert len(narrative) < len(RAMBLE)


def test_the_continuation_floor_goes_after_the_ledgers_entries() -> None:
    """The narrative's floor (the last unresolved error, the open to-do items) stays while the
    ledger's entries are evicted, and goes only when even the ledger's minimum with it does not
    fit: then no evictable entry is left."""
    from test_continuation import ERROR, OPEN, run

    msgs = run()
    for i in range(12):
        note = f"Note {i}: the reviewer prefers small commits touching module {i} and a short changelog entry {i}."
        msgs[6 + 2 * i : 6 + 2 * i] = [{"role": "user", "content": note}, {"role": "assistant", "content": "Noted."}]
    seen = set()
    for n in (100, 130, 150):
        system = {"role": "system", "content": "You are a careful agent working in a billing repository. " * n}
        r = ContextCompactor(max_context_tokens=3_000, min_savings_ratio=0).compact([system, *msgs], force=True)
        assert r.summary is not None and not r.over_budget
        narrative = _narrative(r.summary)
        floor = ERROR in narrative and all(item in narrative for item in OPEN)
        assert _beyond_floor(r.summary) == [] or not r.must_keep_missing
        if r.must_keep_missing and floor:
            seen.add("evicted, floor kept")
        if not floor:
            seen.add("floor gone")
            assert narrative == "" and "Note" not in ledger_of(r.summary)
    assert seen == {"evicted, floor kept", "floor gone"}


def test_over_the_hard_threshold_the_kept_narrative_and_ledger_stay_within_the_window() -> None:
    """In a 300-token window (budget 225) the example session's system prompt and task leave no
    room: late in the run not even the smallest legal context is within the budget, so the summary
    keeps its narrative and ledger entries, but only as much of them as the window itself holds (a
    call of 375 tokens before). The calls over the budget are still reported as such."""
    from context_compactor.replay import replay

    transcript = load(Path(__file__).parent.parent / "examples" / "agent_session.json")
    report = replay(transcript, ContextCompactor(max_context_tokens=300))
    assert report.over_window_turns, "some calls are over the budget either way"
    assert max(t.tokens for t in report.turns) <= 300, [t.tokens for t in report.turns]
    for t in report.over_window_turns:
        assert t.over_budget
