"""The rule summary's file list on the shipped example: operations from what the agent did,
files only (no command lines, no bare directories), across a chain of compactions."""

from __future__ import annotations

import json

from conftest import REPO
from context_compactor import ContextCompactor

EXAMPLE = REPO / "examples" / "agent_session.json"


def _section(summary: str, heading: str) -> list[str]:
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("- "):
            break
        out.append(line[2:])
    return out


def test_a_chain_of_rule_summaries_keeps_each_files_operations() -> None:
    messages = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    c = ContextCompactor(max_context_tokens=20_000, keep_recent_messages=2, summary_max_tokens=4_000)
    # The first compaction summarises the reads of tax.py; the second its rewrite (write_file)
    # and the edit_file of the tests.
    first = c.compact(messages[:10], force=True)
    second = c.compact([*first.messages, *messages[10:]], force=True)
    assert second.summary_source == "rule"
    trail = _section(second.summary or "", "文件变更记录")
    assert trail == [
        "/tmp/repro_tax.py: 创建",
        "/srv/app/billing/tax.py: 修改",  # read first, then rewritten: an edit
        "/srv/app/billing/tests/test_tax.py: 修改",  # edit_file {path, old, new}
    ]


def test_facts_are_not_command_lines_or_a_venv() -> None:
    messages = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    plan = ContextCompactor(max_context_tokens=3_000).plan(messages)
    assert plan.request is not None
    facts = plan.request.must_keep
    assert ".venv" not in facts  # "…/srv/app/.venv/lib/…" in the assistant's prose: a directory
    assert not [f for f in facts if " " in f]
    assert {"/srv/app/billing/tax.py", "/tmp/repro_tax.py", "UnknownRegionError"} <= set(facts)
