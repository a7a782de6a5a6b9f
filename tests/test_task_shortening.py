"""The task (the first user message) is shortened only when it must be, and then by the least
amount (DESIGN, "The task"): never when the result with it verbatim is under the soft
threshold; never below ``task_max_tokens`` (a floor, not a target); its opening verbatim first,
the cut marked, its tail after."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from _messages import conversation
from context_compactor import ContextCompactor, count_tokens, estimate_tokens, validate_messages

CUT = re.compile(r"…\[\d+ chars omitted\]…")


def task_text(n_words: int) -> str:
    opening = (
        "<pr_description> Consider the following PR description: the invoice total is wrong when a "
        "discount and a tax rate apply together; render() rounds each line before summing. "
    )
    middle = " ".join(f"detail{i} about the rounding rules of line items." for i in range(n_words))
    return opening + middle + " Can you help me implement the necessary changes? Run the tests after."


def first_user(messages: list[dict]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def test_a_task_alone_over_the_budget_is_cut_to_the_soft_threshold_not_far_below() -> None:
    # A ~690-token task alone in a 383-token budget: it must be cut, but only as far as the
    # soft threshold needs (it came back as 77 tokens).
    task = task_text(110)
    c = ContextCompactor(max_context_tokens=511, reserve_tokens=128)
    check = c.check([{"role": "user", "content": task}])
    assert check.budget == 383 and check.current_tokens > 600
    r = c.compact([{"role": "user", "content": task}], force=True)
    assert not r.over_budget and r.tokens_after <= check.threshold
    assert r.tokens_after >= 0.85 * check.threshold, (r.tokens_after, check.threshold)
    kept = first_user(r.messages)
    assert CUT.search(kept)
    assert kept.startswith(task[:300]), kept[:320]
    assert [e.action for e in r.record] == ["shortened"]


def test_the_task_stays_verbatim_when_the_rest_can_make_room() -> None:
    # A long task and a long run: summarising the run is enough, the task stays whole.
    msgs = conversation(30)
    task = task_text(120)
    msgs[1] = {"role": "user", "content": task}
    c = ContextCompactor(max_context_tokens=12_000, reserve_tokens=1_000)
    r = c.compact(msgs, force=True)
    assert not r.over_budget
    assert r.messages[1] is msgs[1], [e for e in r.record if e.index == 1]


@pytest.mark.parametrize("ratio", [0.1, 0.3])
def test_a_swe_task_keeps_its_problem_statement_opening(corpus_dir: Path, ratio: float) -> None:
    path = corpus_dir / "openai" / "swe-agent__pydicom__pydicom-1458.json"
    msgs = json.loads(path.read_text())
    total = ContextCompactor(max_context_tokens=10**7).check(msgs).current_tokens
    c = ContextCompactor(max_context_tokens=max(1024, int(total * ratio)))
    task_i = next(i for i, m in enumerate(msgs) if m["role"] == "user")
    task = msgs[task_i]["content"]
    task = task if isinstance(task, str) else "".join(p.get("text", "") for p in task)
    r = c.compact(msgs, force=True)
    assert validate_messages(r.messages) == []
    kept = first_user(r.messages)
    kept = kept if isinstance(kept, str) else "".join(p.get("text", "") for p in kept)
    if r.messages[task_i] is msgs[task_i]:
        return
    # Shortened: the opening verbatim first, and only because the result needed it.
    head = CUT.split(kept)[0]
    assert len(head) >= 100 and task.startswith(head), kept[:300]
    with_task = r.tokens_after - estimate_tokens(kept) + estimate_tokens(task)
    assert with_task > c.check(r.messages).threshold or r.over_budget


def test_the_floor_is_task_max_tokens() -> None:
    task = task_text(400)
    c = ContextCompactor(max_context_tokens=900, reserve_tokens=200, task_max_tokens=300)
    r = c.compact([{"role": "user", "content": task}], force=True)
    kept = first_user(r.messages)
    assert count_tokens(kept) >= 0.9 * 300 or estimate_tokens(kept) >= 0.9 * 300
