"""`context-compactor eval`: the probes against hand-labelled corpus files, the cost model's cache
rules, and a fast subset of the corpus eval (the full one is `make eval`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from context_compactor.cli import main
from context_compactor.eval import PROBES, evaluate
from context_compactor.eval.cost import PRICES, Prompt, simulate
from context_compactor.eval.probes import artifact_trail, constraints, continuation, shell_ops
from context_compactor.io import load

EXAMPLE = REPO / "examples" / "agent_session.json"
BASELINE = REPO / "benches" / "baseline-0.1.toml"

# -- hand labels: read from the transcripts by a person, not from the probe's output ------------------------------
#
# openhands__wrong_initial_state: "Please rename game_2048.py to 2048.py"; the agent views
# /workspace, runs `mv /workspace/game_2048.py /workspace/2048.py`, views again, finishes. No
# imperative in the user's words.
#
# swe-agent marshmallow-1867: `create reproduce.py` (SWE-agent's editor opens it), `insert` the
# reproduction into the open file, `open src/marshmallow/fields.py`, `edit` (search/replace in the
# open file), run, `rm reproduce.py`, submit. The task's instructions hold five imperatives.
#
# mini-swe-agent test_github_issue: `sed -i` adds the colon to tests/missing_colon.py, later
# `cat > tests/missing_colon.py << 'EOF'` rewrites it (the file existed: an edit). Its "Important
# Rules" list three imperatives (the ones inside the fenced examples are code, not orders).
#
# kimi-cli cc_29 (Chinese): the user's "保留核心修复，提交pr，先不要提交debug日志" (keep the core fix,
# open a PR, don't commit the debug logging yet) is the one constraint; a plan file is written,
# then edited three times, and useSessionStream.ts is edited many times.
HAND_LABELS = {
    "openai/openhands__wrong_initial_state.json": (
        [("/workspace/game_2048.py", "moved"), ("/workspace/2048.py", "moved")],
        [],
    ),
    "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json": (
        [("reproduce.py", "deleted"), ("src/marshmallow/fields.py", "edited")],
        [
            "Remember, YOU SHOULD ALWAYS INCLUDE EXACTLY ONE TOOL CALL/FUNCTION CALL PER RESPONSE.",
            "Always start by trying to replicate the bug that the issues discusses.",
            "If you open a file and need to get to an area around a specific line that is not in the first 100 "
            "lines, say line 583, don't just use the scroll_down command multiple times.",
            "Always make sure to look at the currently open file and the current working directory (which "
            "appears right after the currently open file).",
            "Always check the code after you issue an edit to make sure that it reflects what you wanted to "
            "accomplish.",
        ],
    ),
    "openai/mini-swe-agent__test_github_issue.json": (
        [("tests/missing_colon.py", "edited")],
        [
            "Every response must contain exactly one action",
            "The action must be enclosed in triple backticks",
            "Do not combine it with any other command.",
        ],
    ),
    "claude-code/cc_29_77bc73228c_1.jsonl": (
        [
            ("/Users/moonshot/dev/working/kimi/kimi-cli/web/src/hooks/useSessionStream.ts", "edited"),
            ("/Users/moonshot/.claude/plans/squishy-painting-nova.md", "edited"),
        ],
        ["保留核心修复，提交pr，先不要提交debug日志"],
    ),
}


@pytest.mark.parametrize("name", sorted(HAND_LABELS))
def test_probes_match_the_hand_labels(name: str, corpus_dir: Path) -> None:
    transcript = load(corpus_dir / name)
    trail, cons = HAND_LABELS[name]
    assert [(a.path, a.op) for a in artifact_trail(transcript.messages)] == trail
    assert constraints(transcript.messages) == cons


def test_the_marshmallow_trail_keeps_every_operation_in_order(corpus_dir: Path) -> None:
    t = load(corpus_dir / "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json")
    first = artifact_trail(t.messages)[0]
    assert first.ops == ("created", "edited", "deleted")


def test_shell_commands_that_change_files() -> None:
    cmd = (
        "cat <<'EOF' > notes.md\nrm -rf not_a_command\nEOF\n"
        "echo hi >> log.txt 2>&1 && sed -i 's/a > b/c/' src/x.py; git mv old.py new.py | tee out.txt\n"
        'echo "a > b" > /dev/null; ls >&2; rm -f tmp.txt $HOME/x'
    )
    assert list(shell_ops(cmd)) == [
        ("created", "notes.md", None),
        ("edited", "log.txt", None),
        ("edited", "src/x.py", None),
        ("moved", "old.py", "new.py"),
        ("created", "out.txt", None),
        ("deleted", "tmp.txt", None),
    ]


def test_chinese_constraints_and_what_is_not_one() -> None:
    messages = [
        {"role": "user", "content": "别改测试。能不能缩短截流策略？两者的区别是什么？这只是一个例子。必须保留日志"},
        {"role": "assistant", "content": "好的，don't worry。"},
    ]
    assert constraints(messages) == ["别改测试。", "必须保留日志"]


def test_continuation_open_todos_and_the_last_unresolved_error() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t",
                    "type": "function",
                    "function": {
                        "name": "TodoWrite",
                        "arguments": json.dumps(
                            {"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]}
                        ),
                    },
                },
                {"id": "r", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "t", "content": "ok"},
        {"role": "tool", "tool_call_id": "r", "content": "E   AssertionError: 1 != 2\n1 failed"},
    ]
    c = continuation(messages)
    assert c.todos == ("b",) and c.error == "E AssertionError: 1 != 2"
    fixed = [
        *messages,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "s", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "s", "content": "3 passed"},
    ]
    assert continuation(fixed).error is None


# -- the cost model --------------------------------------------------------------------------------------------------


def _prompt(keys: range, per: int = 100, fixed: int = 0) -> Prompt:
    return Prompt("sys", fixed, tuple(keys), tuple(per for _ in keys))


def test_openai_caches_from_1024_tokens_in_128_token_steps() -> None:
    prompts = [_prompt(range(10)), _prompt(range(12)), _prompt(range(20)), _prompt(range(5, 25))]
    calls = simulate(prompts, PRICES["openai"]).calls
    assert [c.cached for c in calls] == [0, 0, 1152, 0]  # 1,000 < 1,024; 1,200 -> 1,152; prefix broken
    p = PRICES["openai"]
    assert calls[2].dollars == pytest.approx((848 * p.input + 1152 * p.cached_read) / 1e6)


def test_anthropic_reads_the_earlier_breakpoint_and_writes_the_rest() -> None:
    prompts = [_prompt(range(12)), _prompt(range(15)), _prompt(range(1, 15)), _prompt(range(40))]
    calls = simulate(prompts, PRICES["anthropic"]).calls
    assert [(c.cached, c.written) for c in calls] == [
        (0, 1200),  # written at the breakpoint
        (1200, 300),  # the earlier breakpoint read, the new part written
        (0, 1400),  # the first message changed: nothing to read
        (0, 4000),  # every earlier breakpoint is more than 20 messages back
    ]


# -- a fast subset of the corpus eval --------------------------------------------------------------------------------

SUBSET = [
    "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json",
    "openai/mini-swe-agent__astropy__astropy-12907.json",
    "claude-code/cc_f5_98a8c28cfd_2.jsonl",
]


@pytest.mark.parametrize("ratio", [0.1, 0.3])
def test_eval_of_a_corpus_subset_keeps_what_the_agent_needs(ratio: float, corpus_dir: Path) -> None:
    files = [corpus_dir / f for f in SUBSET]
    report = evaluate(files, window_ratio=ratio, baseline=_toml(BASELINE))
    o = report.overall("policy")
    for p in PROBES:
        assert o[p] is None or 0.0 <= o[p] <= 1.0
    assert o["recall"] >= 0.98 and o["constraints"] >= 0.98, o
    # At a 10% window the ledger's details budget (budget // 8, DESIGN) holds fewer trail lines
    # than 0.2's preserved details did (up to summary_max_tokens): what it drops is listed in
    # must_keep_missing.
    assert o["artifact_trail"] >= (0.9 if ratio > 0.1 else 0.75), o
    assert o["growth"] == 1.0 and o["max_summary_tokens"] <= max(
        r.summary_cap or 0 for t in report.transcripts for r in t.runs.values()
    )
    b = report.overall("baseline")
    assert o["valid"] or not b["valid"], "no context over the window that the baseline kept inside"
    # Per subset a point may go either way (the baseline's larger summary); over the corpus the policy is ahead.
    # At 10% the baseline's narrative (summary_max_tokens=2000, no growth bound) shows trail lines
    # the policy's ledger had to evict to stay under the window (listed in must_keep_missing).
    slack = 0.02 if ratio > 0.1 else 0.15
    assert o["artifact_trail"] >= b["artifact_trail"] - slack and o["recall"] >= b["recall"] - 0.01
    for key in PRICES:
        assert o["cost"][key] <= b["cost"][key] * 1.01, (key, o["cost"], b["cost"])
        assert 0 < o["cost"][key] < report.overall("no_compaction")["cost"][key]
    d = report.to_dict()
    json.dumps(d)
    assert set(PROBES) <= set(d["overall"]) and len(d["transcripts"]) == 3


def _toml(path: Path) -> dict[str, object]:
    from context_compactor.cli.common import read_toml

    return read_toml(path)


def test_cli_eval_prints_tables_and_writes_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "report.html"
    assert main(["eval", str(EXAMPLE), "--max-tokens", "3000", "--baseline", str(BASELINE), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "overall" in out and "artifacts" in out and "cost vs baseline" in out
    text = html.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2
    body = text.split("<body>")[1].replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http" not in body and "<script" not in body, "no external asset, no script"
    assert main(["eval", str(EXAMPLE), "--window-ratio", "0.3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["window_ratio"] == 0.3 and set(PROBES) <= set(d["overall"])
    assert main(["eval", str(EXAMPLE), "--window-ratio", "2"]) == 2
    assert "window_ratio" in capsys.readouterr().err
    assert main(["eval", "/nonexistent.json"]) == 0
    assert "skipped /nonexistent.json" in capsys.readouterr().out


def test_growth_leaves_out_the_users_own_messages_the_summary_carries() -> None:
    """The growth probe measures the summary proper: the user's messages carried verbatim have
    their own budget (``user_messages_budget_tokens``); the headers match what the core writes."""
    from context_compactor import ContextCompactor
    from context_compactor.eval import _summary_proper

    for words, ask in (("Please keep the public API stable.", "Go on"), ("请保持公共接口不变，不要改测试。", "继续")):
        msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the flaky test in tests/test_io.py."}]
        for i in range(8):
            msgs.append({"role": "assistant", "content": f"Step {i}: looking at src/io_{i}.py. " * 20})
            msgs.append({"role": "user", "content": f"{words} ({i}) " + ask})
        r = ContextCompactor(max_context_tokens=4000, keep_recent_messages=2).compact(msgs, force=True)
        assert r.summary and words in r.summary
        proper = _summary_proper(r.summary)
        rest = r.summary[len(proper) :]
        assert proper and r.summary.startswith(proper) and words in rest
        assert rest.lstrip().startswith("[context-compactor ledger v1]")
