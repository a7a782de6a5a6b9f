"""The cache-aware defaults the eval chose (docs/eval.md, "Evaluating fidelity and cost"): the ladder cuts the
kept tail's tool output down to the target (`cache_aware_cuts`), so the next calls do not cut again."""

from __future__ import annotations

from typing import Any

from context_compactor import CompactionConfig, ContextCompactor, validate_messages


def one_block(n_results: int, size: int) -> list[dict[str, Any]]:
    """A task and one assistant message with parallel calls and their big results: the whole
    conversation after the task is the last block, which no summary can replace."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "cat l{i}"}}'}}
        for i in range(n_results)
    ]
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Find out why the nightly build of billing/ fails."},
        {"role": "assistant", "content": "Reading the logs.", "tool_calls": calls},
    ]
    for i in range(n_results):
        body = "\n".join(f"[{i}:{k}] step {k} ok, 12 warnings, see build/out{k}.txt" for k in range(size))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    return msgs


def test_the_last_block_is_cut_to_the_target_not_just_under_the_threshold() -> None:
    msgs = one_block(3, 400)
    cfg = CompactionConfig(max_context_tokens=20_000, reserve_tokens=2_000)
    deep = ContextCompactor(cfg).compact(msgs)
    shallow = ContextCompactor(cfg.replace(cache_aware_cuts=False)).compact(msgs)
    for r in (deep, shallow):
        assert r.tokens_before > cfg.soft_threshold and not r.over_budget
        assert validate_messages(r.messages, format="openai") == []
        assert any(e.action == "shortened" for e in r.record)
    assert deep.tokens_after <= cfg.target_tokens < shallow.tokens_after <= cfg.soft_threshold
    # The room it bought: the next ~4,000 tokens fit without another cut (another prefix
    # break); after the shallow cut they do not.
    more = [
        {"role": "assistant", "content": "The logs are long; the failure is in step 7."},
        {"role": "user", "content": "Go on. " + "The nightly build log says more. " * 500},
    ]
    c = ContextCompactor(cfg)
    assert c.check([*deep.messages, *more]).urgency == "none"
    assert c.check([*shallow.messages, *more]).urgency != "none"
