"""A provider's compaction items in a reply: the Rust API (``Reply::items``, run by
``examples/parity.rs``) places them as the Python API does (``SummaryResponse(items=...)``):
the same messages, origins, record, ledger message, summary, figures and fallback.

The cases are built here, not read from the corpus: a Responses conversation with OpenAI's
``responses.compact`` output (a user message and one ``compaction`` item), an Anthropic one with
the ``compaction`` block whose content holds the task (not re-sent) or not (re-sent), a copy of
our ledger message among the items (dropped), items that make an invalid request (the rule summary
with ``fallback_reason``), no items at all, and CJK text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _rust import assert_same, run_parity
from context_compactor import ContextCompactor, SummaryResponse, _core
from context_compactor._provider_items import span_of

TASK_EN = "Port src/parser.py to Rust and keep https://example.com/spec.html in mind."
TASK_ZH = "把 src/parser.py 移植到 Rust，参考 https://example.com/spec.html。"


def _responses(task: str, rounds: int = 30) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": task}]
    for i in range(rounds):
        msgs.append({"type": "message", "role": "assistant", "content": f"step {i}: read lib/mod_{i}.rs " * 12})
        msgs.append({"type": "message", "role": "user", "content": f"go on with part {i}"})
    return msgs


def _anthropic(task: str, rounds: int = 30) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(rounds):
        msgs.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"步骤 {i}: 读了 lib/mod_{i}.rs " * 12}]}
        )
        msgs.append({"role": "user", "content": f"继续第 {i} 部分"})
    return msgs


OPENAI_ITEMS = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on with part 3"}]},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque"},
]
OUR_COPY = {"type": "message", "role": "user", "content": f"{_core.SUMMARY_MARKER} an old ledger"}


def _block(content: str) -> list[dict[str, Any]]:
    block = {"type": "compaction", "content": content, "encrypted_content": "opaque", "signature": "sig"}
    return [{"role": "assistant", "content": [block]}]


def _jobs() -> list[dict[str, Any]]:
    base = {"system": None, "tools": None, "max_context_tokens": 3_000, "force": True}
    return [
        {**base, "id": "openai", "messages": _responses(TASK_EN), "format": "responses", "items": OPENAI_ITEMS},
        {
            **base,
            "id": "openai, a copy of our ledger among the items",
            "messages": _responses(TASK_EN),
            "format": "responses",
            "items": [OUR_COPY, *OPENAI_ITEMS],
        },
        {
            **base,
            "id": "openai, CJK",
            "messages": _responses(TASK_ZH),
            "format": "responses",
            "items": OPENAI_ITEMS,
        },
        {
            **base,
            "id": "anthropic, the block does not hold the task: re-sent",
            "messages": _anthropic(TASK_ZH),
            "format": "anthropic",
            "provider": "provider:anthropic",
            "summary": "我们移植了一部分。",
            "items": _block("我们移植了一部分。"),
        },
        {
            **base,
            "id": "anthropic, the block holds the task: not re-sent",
            "messages": _anthropic(TASK_EN),
            "format": "anthropic",
            "provider": "provider:anthropic",
            "summary": f"The user asked: {TASK_EN} Done: parts 0-20.",
            "items": _block(f"The user asked: {TASK_EN} Done: parts 0-20."),
        },
        {
            **base,
            "id": "items that make an invalid request: the rule summary",
            "messages": _responses(TASK_EN),
            "format": "responses",
            "items": [{"type": "function_call_output", "call_id": "nowhere", "output": "x"}],
        },
        {
            **base,
            "id": "no items but our copy: the rule summary",
            "messages": _responses(TASK_EN),
            "format": "responses",
            "items": [OUR_COPY],
        },
    ]


def _python(job: dict[str, Any]) -> dict[str, Any]:
    reply = SummaryResponse(job.get("summary") or "", items=tuple(job["items"]), summary_source=job.get("provider"))
    if job.get("provider") is None:
        reply = SummaryResponse("", items=tuple(job["items"]), summary_source="provider:openai")
    compactor = ContextCompactor(max_context_tokens=job["max_context_tokens"], summarizer=lambda _r: reply)
    r = compactor.compact(job["messages"], format=job["format"], force=True)
    return {
        "messages": json.loads(json.dumps(r.messages)),
        "system": r.system,
        "summary": r.summary,
        "strategy": r.strategy,
        "summary_source": r.summary_source,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "retained_count": r.retained_count,
        "compacted_count": r.compacted_count,
        "origins": [list(o) for o in r.origins],
        "record": [{"index": e.index, "action": e.action, "detail": e.detail} for e in r.record],
        "fallback_reason": r.fallback_reason,
    }


@pytest.fixture(scope="module")
def rust(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_parity(_jobs(), Path(tmp_path_factory.mktemp("items")))


@pytest.mark.parametrize("index", range(len(_jobs())), ids=[j["id"] for j in _jobs()])
def test_the_same_placement(rust: list[dict[str, Any]], index: int) -> None:
    job = _jobs()[index]
    assert_same(rust[index], _python(job), job["id"])


def test_what_a_user_sees(rust: list[dict[str, Any]]) -> None:
    """The placements themselves (not only equal): the compaction item where the summary was, a
    ledger message of ours after it with the facts the encrypted item cannot show, the block first
    with the task re-sent after it only when it does not hold it, and the fallback named."""
    by_id = {j["id"]: r for j, r in zip(_jobs(), rust, strict=True)}
    openai = by_id["openai"]
    assert openai["messages"][0]["content"] == TASK_EN
    kinds = [m.get("type") for m in openai["messages"]]
    at = kinds.index("compaction")
    assert openai["summary_source"] == "provider:openai" and openai["fallback_reason"] is None
    ledger = openai["messages"][at + 1]["content"]
    assert ledger.startswith(_core.SUMMARY_MARKER) and "lib/mod_3.rs" in ledger
    copy = by_id["openai, a copy of our ledger among the items"]
    assert not any(m.get("content") == OUR_COPY["content"] for m in copy["messages"])
    cjk = by_id["openai, CJK"]["messages"]
    assert cjk[0]["content"] == TASK_ZH and any(m.get("type") == "compaction" for m in cjk)
    resent = by_id["anthropic, the block does not hold the task: re-sent"]["messages"]
    assert resent[0]["content"][0]["type"] == "compaction" and resent[1]["content"] == TASK_ZH
    held = by_id["anthropic, the block holds the task: not re-sent"]
    assert held["messages"][0]["content"][0]["type"] == "compaction"
    assert all(m.get("content") != TASK_EN for m in held["messages"])
    assert any(e["action"] == "dropped" and e["index"] == 0 for e in held["record"])
    bad = by_id["items that make an invalid request: the rule summary"]
    assert bad["strategy"] in ("rule_summary", "truncation") and bad["summary_source"] != "provider:openai"
    assert bad["fallback_reason"].startswith("BadReply: the items of provider:openai do not make a valid request")
    none = by_id["no items but our copy: the rule summary"]
    assert none["fallback_reason"] == "BadReply: provider:openai returned no items"


def test_the_request_names_the_span_a_provider_is_sent(rust: list[dict[str, Any]]) -> None:
    """``SummaryRequest::span`` (the Rust request) holds the input indices of the messages Python's
    native summarizers are sent (``request.span``): the replaced messages, our ledger left out."""
    for job, got in zip(_jobs(), rust, strict=True):
        msgs = job["messages"]
        plan = ContextCompactor(max_context_tokens=job["max_context_tokens"]).plan(
            msgs, format=job["format"], force=True
        )
        span = span_of(plan, msgs)
        want = [i for i, m in enumerate(msgs) if any(m is s for s in span)]
        assert got["span"] == want, job["id"]
        assert want and 0 not in want, job["id"]
