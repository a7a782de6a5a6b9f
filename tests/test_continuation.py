"""Continuation kept (issue [6/7]): the open items of the latest plan or to-do list and the last
unresolved error stay in the kept tail or in the summary's narrative, whatever the target, the
summarizer and the chain of compactions. Plans and errors are planted in a long agent run and
looked for in the context a compaction returns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from context_compactor import CompactionConfig, ContextCompactor, SummaryResponse

OPEN = ["Fix the rounding in billing/invoice.py line 88", "Add a regression test for invoices over 10k"]
DONE = "Reproduce the failing nightly build"
ERROR = "E AssertionError: expected total 10450.00, got 10449.99 in test_invoice_rounding"


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def reads(prefix: str, n: int, *, note: str, path: str) -> list[dict[str, Any]]:
    """``n`` rounds of unrelated work (a page read and its plain-text result) to append after a
    compaction before the next one; ``path`` is formatted with the round's index ``i``."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        cid = f"{prefix}_{i}"
        out += [
            {
                "role": "assistant",
                "content": f"{note} {i}.",
                "tool_calls": [call(cid, "read_file", {"path": path.format(i=i)})],
            },
            {"role": "tool", "tool_call_id": cid, "content": "plain text of the page " * 60},
        ]
    return out


def run(*, resolved: bool = False, newer_plan_in_tail: bool = False, zh: bool = False) -> list[dict[str, Any]]:
    """A task, a to-do list, a failing test run, then many unrelated reads (the span a summary
    replaces), then the recent tail."""
    task = "修复夜间构建中的发票舍入问题。" if zh else "Fix the invoice rounding bug the nightly build reports."
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    todos = [{"content": t, "status": "pending"} for t in OPEN] + [{"content": DONE, "status": "completed"}]
    msgs += [
        {"role": "assistant", "content": None, "tool_calls": [call("t1", "TodoWrite", {"todos": todos})]},
        {"role": "tool", "tool_call_id": "t1", "content": "Todos updated."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("r1", "bash", {"command": "pytest tests/billing -q"})],
        },
        {"role": "tool", "tool_call_id": "r1", "content": f"collected 40 items\n\n{ERROR}\n\n1 failed, 39 passed"},
    ]
    for i in range(30):
        line = (
            "模块 {i} 的第 {k} 行：这里没有什么特别的内容"
            if zh
            else "line {k} of module {i}: nothing interesting here at all"
        )
        body = "\n".join(line.format(i=i, k=k) for k in range(30))
        msgs += [
            {
                "role": "assistant",
                "content": f"正在阅读模块 {i}。" if zh else f"Reading module {i}.",
                "tool_calls": [call(f"c{i}", "read_file", {"path": f"billing/m{i}.py"})],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": body},
        ]
        if resolved and i == 20:
            msgs += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call("r2", "bash", {"command": "pytest tests/billing -q"})],
                },
                {"role": "tool", "tool_call_id": "r2", "content": "collected 40 items\n\n40 passed"},
            ]
    if newer_plan_in_tail:
        todos2 = [{"content": "Ship the fix", "status": "in_progress"}]
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call("t2", "TodoWrite", {"todos": todos2})]},
            {"role": "tool", "tool_call_id": "t2", "content": "Todos updated."},
        ]
    msgs += [
        {"role": "user", "content": "继续。" if zh else "Go on."},
        {"role": "assistant", "content": "Looking at the next module."},
    ]
    return msgs


def text(result: Any) -> str:
    return json.dumps([result.messages, result.system], ensure_ascii=False)


def summary_of(result: Any) -> str:
    assert result.summary
    return str(result.summary)


@pytest.mark.parametrize("target_ratio", [0.2, 0.35, 0.5])
def test_the_open_items_and_the_last_error_survive_whatever_the_target(target_ratio: float) -> None:
    msgs = run()
    cfg = CompactionConfig(max_context_tokens=12_000, target_ratio=target_ratio, trigger_ratio=0.8)
    for force in (False, True):
        r = ContextCompactor(cfg).compact(msgs, force=force)
        assert r.compacted and not r.over_budget
        ctx = text(r)
        for item in OPEN:
            assert item in ctx
        assert ERROR in ctx
        if r.summary is not None:
            assert DONE not in r.summary.split("Open to-do items")[-1]


def test_micro_compaction_leaves_the_plan_and_the_failing_run_whole() -> None:
    msgs = run()
    r = ContextCompactor(max_context_tokens=12_000).micro_compact(msgs)
    assert r.strategy == "micro"
    # The old reads are placeholders; the to-do call and the failing run are as they were.
    assert r.messages[1] is msgs[1] and r.messages[2] is msgs[2]
    assert r.messages[3] is msgs[3] and r.messages[4] is msgs[4]
    assert r.messages[6] is not msgs[6]


def test_a_resolved_error_is_not_carried() -> None:
    r = ContextCompactor(max_context_tokens=12_000).compact(run(resolved=True), force=True)
    s = summary_of(r)
    assert "Last unresolved error" not in s
    assert all(item in s for item in OPEN)


def test_a_newer_plan_in_the_kept_tail_is_the_plan() -> None:
    r = ContextCompactor(max_context_tokens=12_000).compact(run(newer_plan_in_tail=True), force=True)
    assert "Ship the fix" in text(r)
    # The older list is not appended after the narrative (the rule summary may still list it
    # among what happened): the tail shows the current plan.
    assert summary_of(r).count("Open to-do items") <= 1


def test_an_llm_narrative_that_forgets_them_gets_them_appended() -> None:
    def forgetful(request: Any) -> SummaryResponse:
        return SummaryResponse("The agent read the billing modules one by one; nothing stood out.")

    r = ContextCompactor(max_context_tokens=12_000, summarizer=forgetful).compact(run(), force=True)
    assert r.summary_source == "llm"
    s = summary_of(r)
    assert s.index("nothing stood out") < s.index(OPEN[0])
    assert all(item in s for item in OPEN) and ERROR in s


def test_they_survive_a_chain_of_compactions() -> None:
    c = ContextCompactor(max_context_tokens=12_000, target_ratio=0.25)
    msgs = run()
    for round_ in range(4):
        r = c.compact(msgs, force=True)
        assert r.compacted, round_
        s = summary_of(r)
        assert all(item in s for item in OPEN) and ERROR in s, round_
        # More unrelated work after it, then compact again.
        msgs = [*r.messages, *reads(f"n{round_}", 12, note="Reading more", path="docs/p{i}.md")]


def test_chinese_conversations_get_chinese_headings() -> None:
    r = ContextCompactor(max_context_tokens=12_000, target_ratio=0.25).compact(run(zh=True), force=True)
    s = summary_of(r)
    assert all(item in s for item in OPEN) and ERROR in s
    assert "Open to-do items" not in s and "Last unresolved error" not in s


def test_a_call_that_got_no_result_is_not_the_last_error() -> None:
    """A call in the span with no result (the repair pass gives it a synthetic one) is not a
    failure: the failing test run before it is still the last unresolved error."""
    msgs = run()
    lost = {"role": "assistant", "content": None, "tool_calls": [call("lost", "bash", {"command": "make lint"})]}
    msgs.insert(10, lost)
    r = ContextCompactor(max_context_tokens=12_000).compact(msgs, force=True)
    assert any("synthetic result" in x for x in r.repairs)
    s = summary_of(r)
    assert ERROR in s
    assert "Last unresolved error: (no result" not in s


def test_a_cut_failing_run_in_the_kept_tail_keeps_its_error_line() -> None:
    """The last block's failing run is cut to fit a small window: the cut keeps its error line
    after the marker (the traceback and the teardown log around it go)."""
    trace = "\n".join(
        f'  File "billing/m{i}.py", line {i}, in step_{i}\n    total = step_{i + 1}(total)' for i in range(60)
    )
    teardown = "\n".join(f"teardown: released fixture db_{i} and its temporary directory" for i in range(60))
    out = f"Traceback (most recent call last):\n{trace}\n{ERROR}\n{teardown}\n1 failed in 0.31s"
    failing = call("r9", "bash", {"command": "pytest tests/billing -x"})
    msgs = [
        *run()[:-2],
        {"role": "assistant", "content": None, "tool_calls": [failing]},
        {"role": "tool", "tool_call_id": "r9", "content": out},
    ]
    r = ContextCompactor(max_context_tokens=1_500).compact(msgs, force=True)
    last = str(r.messages[-1]["content"])
    assert "omitted]" in last and ERROR in text(r)
    assert f"(cut part's last error: {ERROR})" in last


GIT_ERROR = "fatal: not a git repository (or any of the parent directories): .git"


def two_failures(*, first_fixed: bool = False) -> list[dict[str, Any]]:
    """The test run fails, then another command fails too (its error is the last one); the test
    run's error is still unresolved unless the same run comes back clean later."""
    msgs = run()[:-2]
    msgs += [
        {"role": "assistant", "content": None, "tool_calls": [call("g1", "bash", {"command": "git status"})]},
        {"role": "tool", "tool_call_id": "g1", "content": GIT_ERROR},
    ]
    if first_fixed:
        msgs += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("r3", "bash", {"command": "pytest tests/billing -q"})],
            },
            {"role": "tool", "tool_call_id": "r3", "content": "collected 40 items\n\n40 passed"},
        ]
    for i in range(12):
        msgs += [
            {
                "role": "assistant",
                "content": f"Reading notes {i}.",
                "tool_calls": [call(f"k{i}", "read_file", {"path": f"notes/n{i}.md"})],
            },
            {"role": "tool", "tool_call_id": f"k{i}", "content": "plain notes text " * 60},
        ]
    return [*msgs, {"role": "user", "content": "Go on."}, {"role": "assistant", "content": "Next."}]


def test_an_earlier_unresolved_error_stays_through_a_chain() -> None:
    """Another command failing after the test run does not resolve the test run: both errors
    stay, labelled, through chained compactions whose summaries are small (the rule summary's
    list of errors seen keeps only the newest)."""
    c = ContextCompactor(max_context_tokens=6_000, target_ratio=0.25)
    msgs = two_failures()
    for round_ in range(3):
        r = c.compact(msgs, force=True)
        assert r.compacted, round_
        s = summary_of(r)
        assert f"Last unresolved error: {GIT_ERROR}" in s, round_
        assert f"Earlier unresolved error: {ERROR}" in s, round_
        msgs = [*r.messages, *reads(f"m{round_}", 10, note="More", path="d{i}")]


def test_an_error_whose_command_ran_clean_is_not_carried_as_earlier() -> None:
    r = ContextCompactor(max_context_tokens=6_000, target_ratio=0.25).compact(
        two_failures(first_fixed=True), force=True
    )
    s = summary_of(r)
    assert f"Last unresolved error: {GIT_ERROR}" in s
    assert "Earlier unresolved error" not in s


def forgetful(request: Any) -> SummaryResponse:
    return SummaryResponse("The agent read the billing modules one by one; nothing stood out.")


def test_a_task_update_in_the_kept_tail_does_not_hide_the_open_tasks() -> None:
    # TaskCreate items in the replaced span; the kept tail only updates their status (it shows
    # no item's text): the open ones are still what the agent needs next.
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the invoice rounding bug."}]
    for k, t in enumerate([DONE, *OPEN], 1):
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call(f"k{k}", "TaskCreate", {"subject": t})]},
            {"role": "tool", "tool_call_id": f"k{k}", "content": f"Task #{k} created successfully: {t}"},
        ]
    msgs += reads("r", 30, note="Reading module", path="billing/m{i}.py")
    msgs += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("u1", "TaskUpdate", {"taskId": "1", "status": "completed"})],
        },
        {"role": "tool", "tool_call_id": "u1", "content": "Updated task #1 status"},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "Looking at the next module."},
    ]
    r = ContextCompactor(max_context_tokens=12_000, summarizer=forgetful).compact(msgs, force=True)
    assert r.summary_source == "llm"
    s = summary_of(r)
    assert all(item in s for item in OPEN), s
    assert DONE not in s


def test_a_checklist_the_agent_wrote_is_its_plan() -> None:
    # `- [ ]` lines in the agent's prose are its latest plan (over an older to-do call); a checked
    # `- [x]` item is done.
    msgs = run()
    plan = (
        "Plan:\n- [ ] Port the rounding fix to credit notes\n- [x] Read the billing modules\n* [ ] Update the changelog"
    )
    msgs[30:30] = [{"role": "assistant", "content": plan}, {"role": "user", "content": "OK."}]
    r = ContextCompactor(max_context_tokens=12_000, summarizer=forgetful).compact(msgs, force=True)
    s = summary_of(r)
    assert "Port the rounding fix to credit notes" in s and "Update the changelog" in s, s
    assert "Read the billing modules" not in s
    assert OPEN[0] not in s


def test_a_checklist_in_a_call_adds_to_the_plan() -> None:
    # A PR's test plan written through a call: its open items join the to-do list's, which
    # stays open.
    msgs = run()
    body = "## Test plan\n- [ ] Run the nightly build on the fix\n- [ ] Check an invoice over 10k by hand"
    msgs[30:30] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("pr", "bash", {"command": f"gh pr create --body '{body}'"})],
        },
        {"role": "tool", "tool_call_id": "pr", "content": "https://github.com/acme/billing/pull/7"},
    ]
    r = ContextCompactor(max_context_tokens=12_000, summarizer=forgetful).compact(msgs, force=True)
    s = summary_of(r)
    for item in [*OPEN, "Run the nightly build on the fix", "Check an invoice over 10k by hand"]:
        assert item in s, (item, s)


def test_an_item_the_narrative_only_mentions_is_still_listed_under_its_heading() -> None:
    # The next compaction reads the open items back from the heading, not from the prose.
    def mentions(request: Any) -> SummaryResponse:
        return SummaryResponse(f"The agent read the billing modules; it means to {OPEN[0]} next.")

    r = ContextCompactor(max_context_tokens=12_000, summarizer=mentions).compact(run(), force=True)
    s = summary_of(r)
    assert "Open to-do items" in s, s
    listed = s.split("Open to-do items")[1]
    assert all(item in listed for item in OPEN), s


def test_a_cut_failing_runs_error_line_survives_the_next_compaction() -> None:
    """A later compaction summarises the cut failing run the previous one left in the tail: the
    error line its cut kept after the marker is read back as the run's error (the cut output
    shows no other failing line), so the summary still carries it."""
    trace = "\n".join(f'  File "billing/m{i}.py", line {i}, in step_{i}' for i in range(60))
    out = f"Traceback (most recent call last):\n{trace}\n{ERROR}\n" + "teardown: released db\n" * 60
    msgs = [
        *run()[:-2],
        {"role": "assistant", "content": None, "tool_calls": [call("r9", "bash", {"command": "pytest tests/x"})]},
        {"role": "tool", "tool_call_id": "r9", "content": out},
    ]
    compactor = ContextCompactor(max_context_tokens=1_500)
    first = compactor.compact(msgs, force=True)
    assert f"(cut part's last error: {ERROR})" in str(first.messages[-1]["content"])
    later = [*first.messages, *reads("n", 8, note="Reading notes", path="notes/n{i}.md")]
    second = compactor.compact(later, force=True)
    assert second.compacted and not second.over_budget
    assert f"Last unresolved error: {ERROR}" in summary_of(second), summary_of(second)


PLAN = [
    "Start a session and confirm the Tasks tab appears in the toolbar",
    "Expand the panel and check each item's status icon",
    "Confirm the tab closes when the to-do list is cleared",
]


def test_a_test_plan_in_cut_arguments_of_the_last_block_stays_shown() -> None:
    """The last block's call (a PR whose body ends with its test plan) is cut to fit a small
    window: the open checklist items of the cut part are written after the marker, as checklist
    lines a later compaction reads back; the context stays under the soft threshold."""
    body = "\n".join(
        [
            "## Summary",
            *(f"- changed module {i}: the rounding of invoices and credit notes is exact now" for i in range(30)),
            "## Test plan",
            *(f"- [ ] {item}" for item in PLAN),
            *(f"Generated note {i}: nothing to check here, this is filler text" for i in range(12)),
        ]
    )
    # (No to-do list and no failing run before it: a small window's summary carries a few
    # hundred characters of open items.)
    msgs = [
        run()[0],
        *run()[5:-2],
        {"role": "user", "content": "Open the pull request."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("pr", "bash", {"command": f"gh pr create --body '{body}'"})],
        },
        {"role": "tool", "tool_call_id": "pr", "content": "https://github.com/acme/billing/pull/7"},
    ]
    compactor = ContextCompactor(max_context_tokens=1_600)
    r = compactor.compact(msgs, force=True)
    assert r.compacted and not r.over_budget
    args = json.loads(r.messages[-2]["tool_calls"][0]["function"]["arguments"])["command"]
    assert "omitted]" in args
    for item in PLAN:
        assert f"- [ ] {item}" in args, args
    assert r.tokens_after <= compactor.config.soft_threshold
    # The next compaction, with the call in its span, lists them under the to-do heading.
    later = [*r.messages, *reads("n", 8, note="Reading notes", path="notes/n{i}.md")]
    again = compactor.compact(later, force=True)
    listed = summary_of(again).split("Open to-do items:")[-1]
    for item in PLAN:
        assert f"- {item}" in listed, (item, summary_of(again))
