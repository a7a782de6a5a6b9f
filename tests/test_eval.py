"""`context-compactor eval`: the probes against hand-labelled corpus files, the cost model's cache
rules, and a fast subset of the corpus eval (the full one is `make eval`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from context_compactor import CompactionConfig
from context_compactor.cli import main
from context_compactor.eval import PROBES, evaluate
from context_compactor.eval.cost import PRICES, Prompt, simulate
from context_compactor.eval.probes import artifact_trail, constraints, continuation, shell_ops
from context_compactor.io import load

EXAMPLE = REPO / "examples" / "agent_session.json"
#: The ledger (#23) is on main: the eval's widened probes then hold the core to the issue's targets.
LEDGER = "details_budget_tokens" in {f.name for f in dataclasses.fields(CompactionConfig)}
BASELINE = REPO / "benches" / "baseline-0.1.toml"

# -- hand labels: read from the transcripts by a person, not from the probe's output ------------------------------
#
# openhands__wrong_initial_state: "Please rename game_2048.py to 2048.py" (an order); the agent
# views /workspace, runs `mv /workspace/game_2048.py /workspace/2048.py`, views again, finishes.
#
# swe-agent marshmallow-1867: `create reproduce.py` (SWE-agent's editor opens it), `insert` the
# reproduction into the open file, `open src/marshmallow/fields.py`, `edit` (search/replace in the
# open file), run, `rm reproduce.py`, submit. The task's instructions hold fourteen orders: the
# five imperatives ("always", "don't"), and the conditions ("When you think you've fixed the bug,
# re-run …", "If it didn't, issue another command …"), the recommendations and the sentences that
# start with a verb ("Edit all the files …", "Please think about …"). Not orders: "You can use any
# bash commands …", "When you're satisfied …, you can submit …" (permissions), the tips' facts.
#
# mini-swe-agent test_github_issue: `sed -i` adds the colon to tests/missing_colon.py, later
# `cat > tests/missing_colon.py << 'EOF'` rewrites it (the file existed: an edit). The task's
# "Please solve this issue", its five-step workflow ("Analyze …", "Create a script …", …) and its
# "Important Rules" are orders (the ones inside the fenced examples are code, not orders; "Create
# a new file:" is a label of an example).
#
# kimi-cli cc_29 (Chinese): "回到原来的这个bug的分支" (go back to the branch of the original bug) and
# "保留核心修复，提交pr，先不要提交debug日志" (keep the core fix, open a PR, don't commit the debug
# logging yet) are the orders; a plan file is written, then edited three times, and
# useSessionStream.ts is edited many times.
HAND_LABELS = {
    "openai/openhands__wrong_initial_state.json": (
        [("/workspace/game_2048.py", "moved"), ("/workspace/2048.py", "moved")],
        ["Please rename game_2048.py to 2048.py"],
    ),
    "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json": (
        [("reproduce.py", "deleted"), ("src/marshmallow/fields.py", "edited")],
        [
            "Edit all the files you need to and run any checks or tests that you want.",
            "Remember, YOU SHOULD ALWAYS INCLUDE EXACTLY ONE TOOL CALL/FUNCTION CALL PER RESPONSE.",
            "When editing a file, make sure to insert appropriate indentation before each line!",
            "Always start by trying to replicate the bug that the issues discusses.",
            "If the issue includes code for reproducing the bug, we recommend that you re-implement that in your "
            "environment, and run it to make sure you can reproduce the bug.",
            "When you think you've fixed the bug, re-run the bug reproduction script to make sure that the bug has "
            "indeed been fixed.",
            "If the bug reproduction script does not print anything when it successfully runs, we recommend adding a "
            'print("Script completed successfully, no errors.") command at the end of the file,',
            "If you run a command and it doesn't work, try running a different command.",
            "If you open a file and need to get to an area around a specific line that is not in the first 100 "
            "lines, say line 583, don't just use the scroll_down command multiple times.",
            'Do this by running the command: find_file "buggy-input.png" If that doesn\'t work, use the linux '
            "'find' command.",
            "Always make sure to look at the currently open file and the current working directory (which "
            "appears right after the currently open file).",
            "Always check the code after you issue an edit to make sure that it reflects what you wanted to "
            "accomplish.",
            "If it didn't, issue another command to fix it.",
            "Please think about how to install the environment from the repository directory if you need to do so.",
        ],
    ),
    "openai/mini-swe-agent__test_github_issue.json": (
        [("tests/missing_colon.py", "edited")],
        [
            "Please solve this issue: GitHub Issue: SyntaxError: invalid syntax",
            "Analyze the codebase by finding and reading relevant files",
            "Create a script to reproduce the issue",
            "Edit the source code to resolve the issue",
            "Verify your fix works by running your script again",
            "Test edge cases to ensure your fix is robust",
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
        ["回到原来的这个bug的分支", "保留核心修复，提交pr，先不要提交debug日志"],
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
    # The widened constraint probe (conditions, every-rules, preferences, goals) and growth's
    # re-compaction check find what the core lost before the ledger (#23): on this subset 56% of
    # the orders at 10% and 86% at 30%, and a ledger that grew with nothing new.
    # With the ledger, what is still lost is the SWE tasks' instructions beyond the words budget
    # (budget // 8: ~225 tokens at 30% of the 8k-token marshmallow run), evicted in the stated
    # order and listed in must_keep_missing.
    # At 10% the Claude Code session (a 2,953-token window) misses 16 of its 266 facts, paths of
    # `gh api` calls the core's fact reader does not take for paths (the eval's does); with the
    # compaction loops held back (retry_growth_tokens) the subset's recall is 97.8% at 10%.
    floor = 0.975 if ratio <= 0.1 else 0.98
    assert o["recall"] >= floor and o["constraints"] >= ((0.8 if ratio > 0.1 else 0.5) if LEDGER else 0.5), o
    # At a 10% window the ledger's details budget (budget // 8, DESIGN) holds fewer trail lines
    # than 0.2's preserved details did (up to summary_max_tokens): what it drops is listed in
    # must_keep_missing.
    assert o["artifact_trail"] >= (0.9 if ratio > 0.1 else 0.75), o
    assert o["growth"] >= (1.0 if LEDGER else 0.95) and o["max_summary_tokens"] <= max(
        r.summary_cap or 0 for t in report.transcripts for r in t.runs.values()
    )
    b = report.overall("baseline")
    assert o["valid"] or not b["valid"], "no context over the window that the baseline kept inside"
    # Per subset a point may go either way (the baseline's larger summary); over the corpus the policy is ahead.
    # At 10% the baseline's narrative (summary_max_tokens=2000, no growth bound) shows trail lines
    # the policy's ledger had to evict to stay under the window (listed in must_keep_missing).
    # With the hold (retry_growth_tokens) the SWE runs compact less often, at calls where their
    # whole trail is kept, so the Claude Code session's misses weigh more: 75.4% vs 91.0% at 10%.
    # Recall at 10%: 97.8% vs 99.7%, the Claude Code session's 16 facts (above); over the whole
    # corpus (`make eval`) the policy's recall is 93.8% against 94.3% before the hold and the
    # continuation lines (docs/eval.md).
    slack = 0.02 if ratio > 0.1 else 0.16
    recall_slack = 0.01 if ratio > 0.1 else 0.02
    assert o["artifact_trail"] >= b["artifact_trail"] - slack and o["recall"] >= b["recall"] - recall_slack
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


def test_growth_leaves_out_the_ledger_the_summary_carries() -> None:
    """The growth probe measures the narrative: the ledger (the user's words carried verbatim,
    preserved details) has its own budgets; the marks match what the core writes."""
    from context_compactor import ContextCompactor
    from context_compactor.eval import _summary_proper
    from context_compactor.eval.ledger_view import SENTINEL

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
        heads = (SENTINEL, "Preserved details", "保留的细节", "The user's own messages", "用户在被压缩部分中的原话")
        assert rest.lstrip().startswith(heads), rest[:80]


def test_the_constraint_probe_reads_every_form_of_an_order() -> None:
    """Conditions, every-rules, preferences and goals count, in English and Chinese (the eval's own
    rules, apart from the core's classifier); questions and plain statements do not."""
    from context_compactor.eval.canaries import TEMPLATES
    from context_compactor.eval.probes import is_instruction

    for (kind, form, lang), text in TEMPLATES.items():
        if kind != "fact":
            assert is_instruction(text.format(t="CN-ABCDEF")), (kind, form, lang)
    for text in (
        "Can you always run the tests?",
        "If you need the staging database, its host name is db-7.",
        "Each service sits behind the gateway.",
        "The build takes two minutes.",
        "这个前端的逻辑是什么",
        "修改方案",
        "Create a new file:",
    ):
        assert not is_instruction(text), text


def test_every_policy_bills_the_same_model_calls_on_responses_items(corpus_dir: Path) -> None:
    """A Responses agent calls the model once per run of reasoning, message and call items between
    tool outputs; the replayed policy and the static runs (no compaction, truncation) bill those
    same calls (the static runs once billed only the assistant messages: 59 calls of the Codex
    rollout against the policy's 291)."""
    from _responses import to_responses
    from context_compactor.io import Transcript
    from context_compactor.replay import model_calls

    t = load(corpus_dir / "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json")
    # As Codex writes them: a call without assistant text before it is a run of call items only.
    converted = to_responses(t.messages, reasoning=False)
    items = [
        m
        for i, m in enumerate(converted)
        if not (
            m.get("type") == "message"
            and m.get("role") == "assistant"
            and i + 1 < len(converted)
            and converted[i + 1].get("type") == "function_call"
        )
    ]
    transcript = Transcript(messages=items, format="responses", path="marshmallow.responses")
    calls = model_calls(items, "responses")
    assistant_messages = sum(1 for m in items if m.get("type") == "message" and m.get("role") == "assistant")
    assert len(calls) > assistant_messages
    report = evaluate([transcript], window_ratio=0.3, baseline=_toml(BASELINE))
    runs = report.transcripts[0].runs
    assert {k: len(r.tokens) for k, r in runs.items()} == dict.fromkeys(runs, len(calls))


def test_a_fact_dropped_without_a_word_is_counted(tmp_path: Path) -> None:
    """``silent_facts``: a must-keep fact missing from the context that no ``must_keep_missing``
    named. A summarizer that drops every fact and a core that lists them: none silent; the
    count is in the JSON either way."""
    from context_compactor.io import Transcript

    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix tests/test_io.py."}]
    for i in range(12):
        msgs.append({"role": "assistant", "content": f"Reading src/pkg/mod_{i}.py now. " + "x " * 300})
        msgs.append({"role": "user", "content": "go on"})
    report = evaluate([Transcript(messages=msgs, format="openai", path="t.json")], max_tokens=2500)
    run = report.transcripts[0].runs["policy"]
    recall = run.probes["recall"]
    assert run.compactions and 0 <= run.silent_facts <= recall.total - recall.kept
    assert report.to_dict()["overall"]["silent_facts"] == run.silent_facts
