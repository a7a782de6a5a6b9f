"""Canary survival in the eval's replays (``context-compactor eval --canaries``): the grid's
canaries planted in a copy of each transcript, replayed per policy the way an agent loop runs
(a Session with its ConversationState), so a policy that depends on the state can be judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from context_compactor import CompactionConfig
from context_compactor.cli import main
from context_compactor.cli.common import read_toml
from context_compactor.eval import evaluate
from context_compactor.eval.canaries import KINDS, POSITIONS
from context_compactor.eval.planted import planted_copy, planted_replay, survival
from context_compactor.io import load

EXAMPLE = REPO / "examples" / "agent_session.json"
BASELINE = REPO / "benches" / "baseline-0.1.toml"
AUTO = {"target_ratio": "auto"}


def _strip(d: Any) -> Any:
    """A report's dict without its timings and its canaries."""
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in ("seconds", "canaries", "canaries_below_baseline")}
    if isinstance(d, list):
        return [_strip(v) for v in d]
    return d


def test_every_policy_replays_the_same_planted_copy_and_the_eval_figures_stay() -> None:
    plain = evaluate([EXAMPLE], max_tokens=3000, config=AUTO, baseline=read_toml(BASELINE))
    report = evaluate([EXAMPLE], max_tokens=3000, config=AUTO, baseline=read_toml(BASELINE), canaries=True)
    # Planting changes token counts: the planted replays are separate, the eval's figures do not move.
    assert _strip(report.to_dict()) == _strip(plain.to_dict())
    assert plain.canary_policies == () and "canaries" not in plain.to_dict()
    assert report.canary_policies == ("policy", "baseline", "defaults")
    (t,) = report.transcripts
    tokens = {pol: [c.token for c in run.canaries] for pol, run in t.canaries.items()}
    assert len(tokens["policy"]) == 15 and tokens["policy"] == tokens["baseline"] == tokens["defaults"]
    for pol in report.canary_policies:
        s = report.canary_survival(pol)
        assert s["share"] == 1.0 and s["items"][0] == s["items"][1] > 0 and s["silent"] == 0, (pol, s)
        assert set(s["by_kind"]) == set(KINDS) and set(s["by_position"]) == set(POSITIONS)
        assert len(s["by_round"]) == 5 and s["compactions"] >= 3
    d = json.loads(json.dumps(report.to_dict(), ensure_ascii=False))
    assert set(d["canaries"]) == {"policy", "baseline", "defaults"}
    per = d["transcripts"][0]["canaries"]
    assert per["policy"]["run"]["chain"] == "replay" and len(per["policy"]["run"]["items"]) == 15
    # The defaults are not run again when the policy is the defaults.
    same = evaluate([EXAMPLE], max_tokens=3000, baseline=read_toml(BASELINE), canaries=True)
    assert same.canary_policies == ("policy", "baseline")


def test_a_policy_that_drops_the_users_words_loses_canaries() -> None:
    """The ledger's user words turned off: the replays lose canaries the defaults keep."""
    report = evaluate(
        [EXAMPLE],
        max_tokens=3000,
        config={"user_messages_budget_tokens": 0},
        baseline=read_toml(BASELINE),
        canaries=True,
    )
    lost, kept = report.canary_survival("policy"), report.canary_survival("defaults")
    assert kept["share"] == 1.0 and report.canary_survival("baseline")["share"] == 1.0
    assert lost["share"] is not None and lost["share"] < 0.8, lost
    assert any(x is not None and x < 1.0 for x in lost["by_kind"].values())
    # Per transcript, as issue 28's rule reads it: this transcript is below the baseline.
    assert [Path(f).name for f in report.to_dict()["canaries_below_baseline"]] == [EXAMPLE.name]


def test_auto_chooses_its_own_target_in_the_replays() -> None:
    """With the ConversationState of the replay, which has seen the conversation grow,
    ``target_ratio="auto"`` moves off the fixed ratio the defaults keep."""
    planted, items = planted_copy(load(EXAMPLE), 0)
    fixed = planted_replay(planted, items, CompactionConfig(max_context_tokens=3000), policy="defaults")
    auto = planted_replay(planted, items, CompactionConfig(max_context_tokens=3000, target_ratio="auto"), policy="auto")
    ratios = {r.target_ratio for r in fixed.rounds}
    assert len(ratios) == 1 and len(auto.rounds) >= 3
    assert any(r.target_ratio not in ratios for r in auto.rounds), [r.target_ratio for r in auto.rounds]
    assert survival([auto])["share"] == 1.0


def test_cli_prints_canary_survival_beside_the_probes_and_draws_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "auto.toml"
    config.write_text('target_ratio = "auto"\n', encoding="utf-8")
    html = tmp_path / "report.html"
    args = ["eval", str(EXAMPLE), "--max-tokens", "3000", "--config", str(config), "--baseline", str(BASELINE)]
    assert main([*args, "--canaries", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("transcript"))
    assert head.split().index("canaries") == head.split().index("growth") + 1
    section = out.split("canary survival:")[1].splitlines()
    assert section[1].split()[:3] == ["policy", "all", "c1"] and "preference" in section[1]
    assert [line.split()[0] for line in section[2:5]] == ["policy", "baseline", "defaults"]
    assert all("100.0% " in line for line in section[2:5])
    text = html.read_text(encoding="utf-8")
    assert 'id="canaries"' in text and text.count('class="transcript-canaries"') == 1
    assert "where the policy keeps fewer canaries than the baseline: 0\n" in out
    assert main(args) == 0
    assert "canar" not in capsys.readouterr().out
