"""Property-based tests of the Responses invariants on generated item lists: valid by construction
(user messages in English and Chinese, runs of reasoning items before calls, parallel calls with
outputs in any order, assistant messages, server-side and unknown items, a trailing call that may
wait), compacted over random windows and settings. Every result: valid for the provider (the
independent oracle of ``_oracle_responses.py`` and the stub's rules), reasoning kept with its
following item, opaque items returned as the input objects, the input never mutated, the task
kept, created items valid under the SDK's ``ResponseInputParam``."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import _oracle_responses as oracle
from _hypothesis_profiles import examples
from _responses import encrypted
from _responses_stub import problem
from context_compactor import ContextCompactor, TokenCounter, validate_messages

pytest.importorskip("openai", reason="the openai SDK is a test dependency")
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

INPUT = TypeAdapter(ResponseInputParam)

WORDS = ["fix", "src/app.py", "测试", "失败了", "ValueError", "https://example.com/x", "🙂", "the", "tests", "代码"]


@st.composite
def texts(draw: Any, lo: int = 1, hi: int = 60) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=lo, max_size=hi)))


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"type": "message", "role": "developer", "content": "规则: be terse."})
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": draw(texts())}]})
    n_turns = draw(st.integers(1, 4))
    k = 0
    for t in range(n_turns):
        if t:
            items.append({"type": "message", "role": "user", "content": draw(texts())})
        for _ in range(draw(st.integers(0, 6))):
            for _ in range(draw(st.integers(0, 2))):
                k += 1
                items.append(
                    {"type": "reasoning", "id": f"rs_{k}", "summary": [], "encrypted_content": encrypted(str(k))}
                )
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                k += 1
                ids.append(f"call_{k}")
                args = json.dumps({"path": draw(texts(1, 6))}, ensure_ascii=False)
                items.append({"type": "function_call", "call_id": ids[-1], "name": "read", "arguments": args})
            for cid in draw(st.permutations(ids)):
                items.append({"type": "function_call_output", "call_id": cid, "output": draw(texts(1, 300))})
            if draw(st.integers(0, 5)) == 0:
                k += 1
                items.append(
                    {
                        "type": "web_search_call",
                        "id": f"ws_{k}",
                        "status": "completed",
                        "action": {"type": "search", "query": "q"},
                    }
                )
        if draw(st.booleans()):
            k += 1
            items.append({"type": "reasoning", "id": f"rs_{k}", "summary": [], "encrypted_content": encrypted(str(k))})
        k += 1
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{k}",
                "status": "completed",
                "content": [{"type": "output_text", "text": draw(texts()), "annotations": []}],
            }
        )
    if draw(st.booleans()):
        items.append({"type": "function_call", "call_id": "call_waiting", "name": "read", "arguments": "{}"})
    return items


@settings(max_examples=examples(1))
@given(
    items=conversations(),
    share=st.floats(0.05, 1.0),
    keep=st.integers(1, 8),
    role=st.sampled_from(["user", "developer"]),
    force=st.booleans(),
)
def test_responses_invariants(items: list[dict[str, Any]], share: float, keep: int, role: str, force: bool) -> None:
    assert validate_messages(items) == []
    assert oracle.validity(items) == [] and problem({"input": items}) is None
    size = TokenCounter("approx").count_messages(items)
    budget = max(50, int(size * share))
    c = ContextCompactor(
        max_context_tokens=budget + budget // 4,
        reserve_tokens=budget // 4,
        keep_recent_messages=keep,
        summary_role=role,
    )
    before = copy.deepcopy(items)
    r = c.compact(items, force=force)
    note(f"strategy={r.strategy} over_budget={r.over_budget} tokens {r.tokens_before}->{r.tokens_after}")
    assert items == before, "the input was mutated"
    out = r.messages
    assert validate_messages(out, format="responses") == []
    assert oracle.validity(out) == []
    assert problem({"input": out}) is None
    assert list(oracle.separated(items, out)) == []
    assert list(oracle.altered(items, out)) == []
    assert r.tokens_after <= c.config.soft_threshold or r.over_budget
    task = items[1] if items[0]["role"] == "developer" else items[0]
    assert any(m is task for m in out) or any(e.action == "shortened" for e in r.record)
    ids = {id(m) for m in items}
    INPUT.validate_python([m for m in out if id(m) not in ids])
    gone = [i for i, m in enumerate(items) if not any(o is m for o in out)]
    assert set(gone) <= {e.index for e in r.record}
