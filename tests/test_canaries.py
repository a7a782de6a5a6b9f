"""Canaries planted in corpus conversations survive chained compactions (the smoke of
``make canaries``: a few conversations, every budget, both chains, both summarizers), and the
adversarial summarizer does what it promises."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from context_compactor import CompactionConfig, ContextCompactor, SummaryRequest
from context_compactor.eval.adversarial import FAKE_ENTRY, MAX_RUN, adversarial_summarizer, longest_shared_run
from context_compactor.eval.canaries import KINDS, POSITIONS, TEMPLATES, canaries_for, plant
from context_compactor.eval.chains import slices
from context_compactor.eval.grid import CanaryReport, main, run_grid
from context_compactor.eval.instruction_chain import instructions_of
from context_compactor.io import load

#: The smoke's slice: Chinese Claude Code sessions (as Anthropic blocks and as OpenAI messages), an
#: English SWE-agent run (one user message, then tool calls) and a small OpenHands one.
SMOKE = [
    "claude-code/cc_08_60e52c3d41_2.jsonl",
    "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json",
    "openai/openhands__basic_gui_mode.json",
    "openai/kimi-cli-claude-code__cc_f5_98a8c28cfd_2.json",
]


@pytest.fixture(scope="module")
def smoke(corpus_dir: Path) -> tuple[CanaryReport, float]:
    t0 = time.perf_counter()
    report = run_grid([corpus_dir / f for f in SMOKE], rounds=5, instructions=10)
    return report, time.perf_counter() - t0


def test_every_template_is_one_sentence_with_its_token() -> None:
    assert len(TEMPLATES) == len(KINDS) * 3 * 2
    for (kind, form, lang), text in TEMPLATES.items():
        s = text.format(t="CN-ABCDEF")
        assert s.count("CN-ABCDEF") == 1 and s.endswith("." if lang == "en" else "。"), (kind, form)


def test_planting_keeps_the_conversation_valid_and_the_original_untouched(corpus_dir: Path) -> None:
    from context_compactor import validate_messages

    for name in SMOKE:
        t = load(corpus_dir / name)
        before = json.dumps(t.messages, sort_keys=True)
        planted, canaries = plant(t, canaries_for(name, 0))
        assert json.dumps(t.messages, sort_keys=True) == before, "the corpus copy is not touched"
        assert {c.position for c in canaries} == set(POSITIONS) and len(canaries) == 15
        rules = {p.rule for p in validate_messages(planted.messages, format=t.format, system=t.system)}
        assert rules <= {p.rule for p in validate_messages(t.messages, format=t.format, system=t.system)}
        text = json.dumps(planted.messages, ensure_ascii=False)
        for c in canaries:
            assert json.dumps(c.text, ensure_ascii=False)[1:-1] in text
            assert 0 < c.index < len(planted.messages)
        tops = [c.index for c in canaries if c.position == "top"]
        bottoms = [c.index for c in canaries if c.position == "bottom"]
        assert max(tops) < min(bottoms)


def test_growing_chain_slices_end_before_model_calls(corpus_dir: Path) -> None:
    t = load(corpus_dir / SMOKE[1])
    ends = slices(t.messages, t.format, 5)
    assert ends[-1] == len(t.messages) and ends == sorted(ends) and len(ends) == 5
    assert all(t.messages[i]["role"] == "assistant" for i in ends[:-1])


def test_the_adversarial_summarizer_paraphrases_drops_and_lies() -> None:
    prompt = (
        "Never delete the backups in the storage bucket CN-1. Do not change the public interface of "
        "the module CN-2. The tests in tests/test_io.py fail with ValueError in src/io.py."
    )
    request = SummaryRequest(
        system_prompt="You summarise conversations.",
        user_prompt=prompt,
        previous_summary="Earlier: the user asked to fix tests/test_io.py and keep the API stable.",
        must_keep=("tests/test_io.py", "ValueError", "src/io.py", "https://example.com/x"),
    )
    reply = adversarial_summarizer(request)
    inputs = [request.system_prompt, request.user_prompt, request.previous_summary or ""]
    assert longest_shared_run(reply, inputs) <= MAX_RUN
    assert "tests/test_io.py" in reply and "src/io.py" in reply
    assert "ValueError" not in reply.replace("valueerror", "") and "https://example.com/x" not in reply
    assert FAKE_ENTRY in reply and "Preserved details:" in reply
    assert adversarial_summarizer(request) == reply, "deterministic"
    # Its own reply as the next input: still no run of 6 words copied.
    again = SummaryRequest(system_prompt="s", user_prompt=prompt, previous_summary=reply)
    assert longest_shared_run(adversarial_summarizer(again), [prompt, reply, "s"]) <= MAX_RUN


def test_the_adversarial_summarizer_runs_as_a_users_summarizer(corpus_dir: Path) -> None:
    t = load(corpus_dir / SMOKE[2])
    r = ContextCompactor(max_context_tokens=4000, summarizer=adversarial_summarizer).compact(
        t.messages, system=t.system, tools=t.tools, force=True
    )
    assert r.summary_source == "llm" and r.strategy == "summary", r


def test_instructions_of_a_conversation_are_the_users_orders(corpus_dir: Path) -> None:
    t = load(corpus_dir / SMOKE[1])
    found = instructions_of(t.messages)
    assert found and all(i.index == 1 or t.messages[i.index]["role"] == "user" for i in found)
    assert "Always start by trying to replicate the bug that the issues discusses." in [i.text for i in found]


# -- the smoke of the grid ---------------------------------------------------------------------------------------------


def test_smoke_runs_in_under_two_minutes_and_reports_every_cell(smoke: tuple[CanaryReport, float]) -> None:
    report, seconds = smoke
    assert seconds < 120, f"the smoke took {seconds:.0f} s"
    rows = report.table()
    assert len(rows) == 2 * 4 * 2, "every summarizer x budget x chain"
    for row in rows:
        assert len(row["by_round"]) == 5 and row["chains"] == len(SMOKE)
        assert row["errors"] == 0, row
        assert isinstance(row["silent_losses"], int)
    assert report.instruction_runs, "the instruction chains ran"
    json.dumps(report.to_dict())


# -- the targets (#23) ---------------------------------------------------------------------------------------
#
# Before the ledger (main at 84640be) the smoke was far from most targets (docs/canaries.md):
# those the ledger meets are strict xfails until it is on main (``until_ledger``), then plain
# tests; two held already (within the budget at 10%, no forced round grows). Two targets the
# ledger does not meet with its default budgets stay strict xfails with the figures
# (``not_met``): the day they are met, the test says so.

LEDGER = "details_budget_tokens" in {f.name for f in dataclasses.fields(CompactionConfig)}
until_ledger = pytest.mark.xfail(not LEDGER, reason="the ledger (#23) is not on main yet", strict=True)


def not_met(why: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(reason=f"#23 target not met: {why}", strict=True)


def _rows(report: CanaryReport, **where: str) -> list[dict[str, Any]]:
    return [r for r in report.table() if all(r[k] == v for k, v in where.items())]


@until_ledger
def test_unbudgeted_every_canary_survives_every_round(smoke: tuple[CanaryReport, float]) -> None:
    report, _ = smoke
    for row in _rows(report, budget="unbudgeted"):
        assert row["by_round"] == [1.0] * 5, row


@until_ledger
def test_every_lost_canary_is_listed_in_must_keep_missing(smoke: tuple[CanaryReport, float]) -> None:
    """At every window and round, a canary that is gone was evicted and said so."""
    report, _ = smoke
    for row in report.table():
        assert row["silent_losses"] == 0, row


def test_at_30_percent_95_percent_survive_round_5(smoke: tuple[CanaryReport, float]) -> None:
    """The full grid (``make canaries``) keeps 98.2% (forced and growing) at round 5, both
    summarizers, since goals and approval rules rank as instructions (96.3% and 96.1% before)."""
    report, _ = smoke
    for row in _rows(report, budget="30%"):
        assert row["by_round"][-1] >= 0.95, row


@not_met(
    "the full grid (make canaries) meets it: 97.0% (forced) and 95.2% (growing) at round 5, both summarizers; "
    "this smoke keeps 91.7% because marshmallow loses 5 of 15 (418 + 330 tokens of system prompt and the "
    "task's floor, a 37-token last block and the summary's marker leave about 230 tokens of a 1,058-token "
    "soft threshold for the ledger), every loss listed and in the stated order (the next test); "
    "docs/canaries.md"
)
def test_at_20_percent_95_percent_survive_round_5(smoke: tuple[CanaryReport, float]) -> None:
    report, _ = smoke
    for row in _rows(report, budget="20%"):
        assert row["by_round"][-1] >= 0.95, row


def test_what_a_budget_takes_goes_in_the_stated_order(smoke: tuple[CanaryReport, float]) -> None:
    """The 20% cell above misses 95% on marshmallow alone (55 of 60): DESIGN's ladder, not a
    leak. Judged from the canaries' own kinds (not the core's classifier): no safety rule is
    ever lost, and whenever a canary that orders something (a constraint, goal or preference)
    is gone, every fact the user stated before it is gone too (the ledger gives up the user's
    non-instruction sentences first, oldest first). A fact kept in the context while an older
    order is lost would be the wrong order."""
    report, _ = smoke
    lost_orders = 0
    for run in report.runs:
        items = run.canaries
        for r in run.rounds:
            for j, c in enumerate(items):
                if not r.said[j] or r.kept[j]:
                    continue
                where = (run.file, run.summarizer, run.budget, run.chain, r.round, c.text)
                assert c.kind != "safety", where
                if c.kind == "fact":
                    continue
                lost_orders += 1
                kept_older_facts = [
                    f.text
                    for k, f in enumerate(items)
                    if f.kind == "fact" and r.said[k] and r.kept[k] and (f.index, k) < (c.index, j)
                ]
                assert not kept_older_facts, (where, kept_older_facts)
    assert lost_orders, "the smoke's tight windows (marshmallow at 20%) do give up orders"


def test_at_10_percent_within_the_budget(smoke: tuple[CanaryReport, float]) -> None:
    report, _ = smoke
    for run in report.select(budget="10%"):
        for r in run.rounds:
            assert r.within, (run.file, run.summarizer, run.chain, r.round, r.tokens_after, r.soft_threshold)


def test_forced_rounds_never_grow(smoke: tuple[CanaryReport, float]) -> None:
    """A forced round never returns more tokens than it got, and its ledger grows only by what
    was in the context outside it (invariant 8)."""
    report, _ = smoke
    problems = [
        (r.file, r.summarizer, r.budget, p)
        for r in report.select(chain="forced")
        for p in r.problems()
        if "strategy='none'" not in p
    ]
    assert not problems, problems


def test_forced_rounds_always_compact(smoke: tuple[CanaryReport, float]) -> None:
    report, _ = smoke
    none = [
        (r.file, r.summarizer, r.budget, x.round, x.reason)
        for r in report.select(chain="forced")
        for x in r.rounds
        if x.strategy == "none"
    ]
    assert not none, none[:5]


@until_ledger
def test_every_instruction_survives_ten_compactions_or_is_listed(smoke: tuple[CanaryReport, float]) -> None:
    report, _ = smoke
    for row in report.table(report.instruction_runs):
        assert row["silent_losses"] == 0, row


def test_what_holds_before_the_ledger(smoke: tuple[CanaryReport, float]) -> None:
    """Today: the first compaction of a forced chain keeps every canary when nothing must be
    evicted (the rule summary and the adversarial one alike), and nothing crashes."""
    report, _ = smoke
    for row in _rows(report, budget="unbudgeted", chain="forced"):
        assert row["by_round"][0] == 1.0, row
    assert not [r.error for r in (*report.runs, *report.instruction_runs) if r.error]


def test_the_cli_writes_a_table_json_and_html(tmp_path: Path, corpus_dir: Path, capsys: Any) -> None:
    out_json, out_html = tmp_path / "c.json", tmp_path / "c.html"
    args = [str(corpus_dir / SMOKE[2]), "--budgets", "unbudgeted,10%", "--rounds", "2", "--instructions", "2"]
    assert main([*args, "--json", str(out_json), "--html", str(out_html)]) == 0
    out = capsys.readouterr().out
    assert "canaries: survival by round" in out and "silent" in out
    d = json.loads(out_json.read_text(encoding="utf-8"))
    assert d["rounds"] == 2 and d["table"] and d["runs"]
    html = out_html.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 2 and "<script" not in html
    # The JSON draws the same report again.
    again = tmp_path / "again.html"
    assert main(["--from-json", str(out_json), "--html", str(again)]) == 0
    assert again.read_text(encoding="utf-8") == html and capsys.readouterr().out == out


def test_the_cli_runs_the_chains_with_a_config(tmp_path: Path, corpus_dir: Path, capsys: Any) -> None:
    """``--config`` gives the canary chains other CompactionConfig fields (a lower trigger here);
    the window stays the budget's. A bad field is a one-line usage error."""
    args = [str(corpus_dir / SMOKE[2]), "--budgets", "30%", "--rounds", "2", "--instructions", "0"]
    thresholds = []
    for fields in ("", "trigger_ratio = 0.6\n"):
        cfg, out = tmp_path / "c.toml", tmp_path / "c.json"
        cfg.write_text(fields, encoding="utf-8")
        assert main([*args, "--config", str(cfg), "--json", str(out)]) == 0
        runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
        assert runs and not [r["error"] for r in runs if r["error"]]
        thresholds.append({rd["soft_threshold"] for r in runs for rd in r["rounds"]})
    default, lower = thresholds
    assert len(default) == len(lower) == 1 and lower.pop() < default.pop()
    (tmp_path / "bad.toml").write_text("bogus = 1\n", encoding="utf-8")
    with pytest.raises(SystemExit) as e:
        main([*args, "--config", str(tmp_path / "bad.toml")])
    assert e.value.code == 2 and "bogus" in capsys.readouterr().err
