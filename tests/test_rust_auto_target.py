"""``target_ratio="auto"`` is one chooser in the core (``src/config/auto_target.rs``): the Rust API
(``examples/parity.rs``) and the Python API choose the same target for the same conversation and
state, and compact to the same messages.

Each case grows a conversation call by call with one ``ConversationState`` per API (a ``check``
per call: the growth per call the chooser weighs), then compacts it with that state; without a
state the fixed fallback ratio applies in both. Chat, Anthropic and Responses messages, English
and Chinese, with the rule summary and with a summarizer (whose own call the chooser prices).

Both report the same choice (Rust's ``Compactor::auto_target``, Python's ``auto_target``) and set
the same due point in the state after the compaction (``due_at``); the conversation then goes on
from the compacted messages, and each ``check`` with the state (whose threshold the due point
lowers) says the same in both, down to the urgency."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _rust import assert_same, run_parity
from context_compactor import ContextCompactor, ConversationState

DUE_WINDOW = 40_000
FIXED = "<summary>\n1. Goal: as stated.\n2. Progress: tables read.\n</summary>"


def _conversation(fmt: str, zh: bool, calls: int) -> list[dict[str, Any]]:
    task = "把 data/ 下的每张表汇总到 report.md。" if zh else "Summarise every table under data/ into report.md."
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    if fmt == "responses":
        msgs = [{"type": "message", **msgs[0]}]
    for i in range(calls):
        row = ("表格的一行数据 " if zh else "a data row of the table ") * (40 + 7 * (i % 5))
        if fmt == "openai":
            cid = f"c{i}"
            msgs += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "bash", "arguments": f'{{"cmd": "cat f{i}"}}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": cid, "content": row},
            ]
        elif fmt == "anthropic":
            cid = f"toolu_{i}"
            msgs += [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": cid, "name": "bash", "input": {"cmd": f"cat f{i}"}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": row}]},
            ]
        else:
            cid = f"call_{i}"
            msgs += [
                {"type": "function_call", "call_id": cid, "name": "bash", "arguments": f'{{"cmd": "cat f{i}"}}'},
                {"type": "function_call_output", "call_id": cid, "output": row},
            ]
        if i % 6 == 5:
            msgs.append({"role": "user", "content": f"继续，第 {i} 步" if zh else f"go on after step {i}"})
            if fmt == "responses":
                msgs[-1] = {"type": "message", **msgs[-1]}
    return msgs


def _jobs() -> list[dict[str, Any]]:
    jobs = []
    for fmt in ("openai", "anthropic", "responses"):
        for zh in (False, True):
            for summary in (None, FIXED):
                msgs = _conversation(fmt, zh, 60)
                grow = list(range(3, len(msgs), 2))
                jobs.append(
                    {
                        "id": f"{fmt}:{'zh' if zh else 'en'}:{'llm' if summary else 'rule'}",
                        "messages": msgs,
                        "system": None,
                        "tools": None,
                        "format": fmt,
                        "max_context_tokens": 12_000,
                        "target_ratio": "auto",
                        "summary": summary,
                        "grow": grow,
                    }
                )
    # A window where the due point falls below the soft threshold: the conversation goes on
    # after the compaction and becomes due before the soft threshold.
    for fmt, zh, summary in (("openai", False, None), ("anthropic", True, FIXED), ("responses", False, None)):
        whole = _conversation(fmt, zh, 150)
        cut = len(_conversation(fmt, zh, 100))
        msgs, more = whole[:cut], whole[cut:]
        jobs.append(
            {
                "id": f"due point, {fmt}:{'zh' if zh else 'en'}:{'llm' if summary else 'rule'}",
                "messages": msgs,
                "system": None,
                "tools": None,
                "format": fmt,
                "max_context_tokens": DUE_WINDOW,
                "target_ratio": "auto",
                "summary": summary,
                "grow": list(range(3, len(msgs), 2)),
                "more": more,
                "more_grow": list(range(2, len(more) + 1, 2)),
            }
        )
    msgs = _conversation("openai", False, 60)
    jobs.append(
        {
            "id": "no state: the fallback ratio",
            "messages": msgs,
            "system": None,
            "tools": None,
            "format": "openai",
            "max_context_tokens": 12_000,
            "target_ratio": "auto",
            "summary": None,
        }
    )
    return jobs


def _python(job: dict[str, Any]) -> dict[str, Any]:
    fixed = job["summary"]
    c = ContextCompactor(
        max_context_tokens=job["max_context_tokens"],
        target_ratio=job["target_ratio"],
        summarizer=(lambda _r: fixed) if fixed else None,
    )
    msgs, fmt = job["messages"], job["format"]
    state = None
    if job.get("grow") is not None:
        state = ConversationState()
        for n in job["grow"]:
            c.check(msgs[:n], format=fmt, state=state)
    c.check(msgs, format=fmt, state=state)
    auto = None
    if state is not None:
        a = c.auto_target(msgs, format=fmt, state=state)
        auto = {k: v for k, v in vars(a).items()} | {"prices": list(a.prices)}
    r = c.compact(msgs, format=fmt, state=state)
    more, after = job.get("more") or [], []
    for k in job.get("more_grow") or []:
        check = c.check(r.messages + more[:k], format=fmt, state=state)
        after.append(
            {
                "urgency": check.urgency,
                "threshold": check.threshold,
                "current_tokens": check.current_tokens,
                "held_until": check.held_until,
            }
        )
    return {
        "messages": json.loads(json.dumps(r.messages)),
        "summary": r.summary,
        "strategy": r.strategy,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "retained_count": r.retained_count,
        "origins": [list(o) for o in r.origins],
        "record": [{"index": e.index, "action": e.action, "detail": e.detail} for e in r.record],
        "target_ratio": r.target_ratio,
        "auto": auto,
        "due_at": state.due_at if state is not None else None,
        "after": after,
    }


@pytest.fixture(scope="module")
def rust(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_parity(_jobs(), Path(tmp_path_factory.mktemp("auto")))


@pytest.mark.parametrize("index", range(len(_jobs())), ids=[j["id"] for j in _jobs()])
def test_the_same_target_and_compaction(rust: list[dict[str, Any]], index: int) -> None:
    job = _jobs()[index]
    assert_same(rust[index], _python(job), job["id"])


def test_the_choice_is_made_and_bounded(rust: list[dict[str, Any]]) -> None:
    """Not only equal: with a state the chosen ratio is within 0.2-0.7 and not always the
    fallback; without one it is the fallback, half the budget."""
    ratios = {j["id"]: r["target_ratio"] for j, r in zip(_jobs(), rust, strict=True)}
    chosen = [v for k, v in ratios.items() if k != "no state: the fallback ratio"]
    assert all(0.2 <= v <= 0.7 for v in chosen), ratios
    assert any(v != 0.5 for v in chosen), ratios
    assert ratios["no state: the fallback ratio"] == 0.5


def test_the_due_point_makes_check_due_before_the_soft_threshold(rust: list[dict[str, Any]]) -> None:
    """Not only equal: where the due point is below the soft threshold, Rust's ``check`` reports
    it as its threshold and says ``soft`` from it, below the configured soft threshold, until
    the conversation is compacted again."""
    soft = ContextCompactor(max_context_tokens=DUE_WINDOW).config.soft_threshold
    cases = [(j, r) for j, r in zip(_jobs(), rust, strict=True) if j["id"].startswith("due point")]
    assert cases
    for job, got in cases:
        due = got["due_at"]
        assert due is not None and got["tokens_after"] < due < soft, (job["id"], due, soft)
        assert got["auto"]["growth"] is not None and got["auto"]["ratio"] == got["target_ratio"], job["id"]
        assert all(a["threshold"] == due for a in got["after"]), job["id"]
        early = [a for a in got["after"] if due <= a["current_tokens"] < soft]
        assert early and all(a["urgency"] == "soft" for a in early), job["id"]
        assert all(a["urgency"] == "none" for a in got["after"] if a["current_tokens"] < due), job["id"]
