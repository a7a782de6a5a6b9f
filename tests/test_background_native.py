"""Native strategies in the background path (``background=True``): the provider's compaction runs in
the job and is applied with the delta rule, through the real openai / anthropic SDKs against the
127.0.0.1 stub of both endpoints (``_native_stub``), on the Codex rollout and the Claude Code
sessions of the shared corpus."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest

from _native_stub import NativeStub
from conftest import claude_code_corpus_files, corpus_or_skip
from context_compactor import CompactResult, ContextCompactor, io, validate_messages
from context_compactor.session import Session
from context_compactor.summarizers import anthropic_compaction, openai_responses_compact
from test_native import _anthropic, _openai
from test_session import integrity

WINDOW = {"max_context_tokens": 12_000, "reserve_tokens": 1_000}


@pytest.fixture()
def stub() -> Any:
    with NativeStub() as s:
        yield s


def replay(s: Session, messages: list[Any], fmt: str, until: str) -> tuple[list[CompactResult], list[Any]]:
    """Append the messages one by one as an agent would, ``prepare()`` after each (a finished job
    is then applied by the next call), every context checked valid and inside the window. Stops
    after the first compaction whose ``summary_source`` is ``until``; returns the results and the
    messages appended after the snapshot of that compaction's job (its delta)."""
    results: list[CompactResult] = []
    budget = s.compactor.config.budget
    for k, m in enumerate(messages):
        if not _model_call(messages, k):
            s.append(m)
            continue
        job = s.pending
        r = s.prepare()
        if r is not None:
            results.append(r)
        assert validate_messages(s.context(), format=fmt, system=s.system, tools=s.tools) == []
        # Over the window only when even the smallest legal context is (the result says so).
        assert s.check().current_tokens <= budget or (r is not None and r.over_budget)
        if r is not None and r.summary_source == until:
            delta = s.history()[job.snap.upto_seq :] if job is not None else []
            return results, delta
        if s.pending is not None:
            assert s.pending.wait(20)
        s.append(m)
    return results, []


def _output(m: Any) -> bool:
    return m.get("role") == "assistant" or m.get("type") in ("reasoning", "function_call", "custom_tool_call")


def _model_call(messages: list[Any], k: int) -> bool:
    """Whether ``messages[k]`` is the first of a model reply: the agent calls the model before it."""
    return k > 0 and _output(messages[k]) and not _output(messages[k - 1])


def test_codex_rollout_compacted_by_responses_compact_in_the_background(stub: NativeStub, tmp_path: Path) -> None:
    t = io.load(corpus_or_skip() / "responses" / "codex-session-viewer_example.jsonl")
    compactor = ContextCompactor(
        summarizer=openai_responses_compact(_openai(stub), "gpt-5.4"), background=True, **WINDOW
    )
    path = tmp_path / "codex.db"
    s = Session("s", compactor=compactor, store=path, system=t.system, format="responses")
    results, delta = replay(s, t.messages, "responses", "provider:openai")
    done = results[-1]
    assert done.summary_source == "provider:openai" and done.fallback_reason is None
    ctx = s.context()
    kinds = [m.get("type") for m in ctx]
    assert kinds.count("compaction") == 1
    # The stub was sent the span as Responses items, through the SDK.
    assert stub.requests and all(p == "/v1/responses/compact" for p, _, _ in stub.requests)
    # The delta (appended while the job ran) follows the provider's items verbatim.
    if delta:
        assert ctx[len(ctx) - len(delta) :] == delta
    record = s.compactions()[-1]
    assert record.strategy == "summary" and record.replaced
    again = Session("s", compactor=ContextCompactor(**WINDOW), store=path, format="responses")
    assert again.context() == ctx
    again.close()
    s.close()
    integrity(path)


@pytest.mark.parametrize("name", [p.name for p in claude_code_corpus_files()])
def test_claude_code_sessions_compacted_by_anthropic_compaction_in_the_background(
    stub: NativeStub, tmp_path: Path, name: str
) -> None:
    t = io.load(corpus_or_skip() / "claude-code" / name)
    compactor = ContextCompactor(
        summarizer=anthropic_compaction(_anthropic(stub), "claude-test"), background=True, **WINDOW
    )
    path = tmp_path / "cc.db"
    s = Session("s", compactor=compactor, store=path, system=t.system, format="anthropic")
    results, _ = replay(s, t.messages, "anthropic", "provider:anthropic")
    if not any(r.summary_source == "provider:anthropic" for r in results):
        # A session too short to reach the soft threshold, or whose only span the planner could not
        # cut: never a failed provider call.
        assert all(r.fallback_reason is None for r in results), [r.fallback_reason for r in results]
        assert len(s.history()) < 40 or not stub.requests
        s.close()
        return
    ctx = s.context()
    first = ctx[0]
    assert first["role"] == "assistant" and first["content"][0]["type"] == "compaction"
    assert first["content"][0]["signature"] == "sig-stub"  # round-tripped verbatim through the store
    task = t.messages[0]
    block = first["content"][0]["content"]
    assert task in ctx[1:3] or " ".join(str(task["content"]).split())[:60] in block
    again = Session("s", compactor=ContextCompactor(**WINDOW), store=path, format="anthropic")
    assert again.context() == ctx
    again.close()
    s.close()
    integrity(path)


def test_a_failed_provider_call_in_the_background_falls_back_to_the_rule_summary(stub: NativeStub) -> None:
    stub.fail = (500, {"error": {"message": "stub 500", "type": "server_error"}})
    t = io.load(corpus_or_skip() / "responses" / "codex-session-viewer_example.jsonl")
    compactor = ContextCompactor(
        summarizer=openai_responses_compact(_openai(stub), "gpt-5.4"), background=True, cooldown_calls=2, **WINDOW
    )
    s = Session(compactor=compactor, store=":memory:", system=t.system, format="responses")
    results, _ = replay(s, t.messages, "responses", "(run to the end)")
    failed = [r for r in results if r.fallback_reason]
    assert failed and "ProviderCompactionError" in (failed[0].fallback_reason or "")
    assert failed[0].summary_source == "rule" and stub.requests
    assert not any(r.summary_source == "provider:openai" for r in results)
    s.close()


def test_async_client_in_the_background(stub: NativeStub) -> None:
    t = io.load(corpus_or_skip() / "responses" / "codex-session-viewer_example.jsonl")
    client = openai.AsyncOpenAI(base_url=stub.url("/v1"), api_key="test", max_retries=0)
    compactor = ContextCompactor(summarizer=openai_responses_compact(client, "gpt-5.4"), background=True, **WINDOW)

    async def main() -> CompactResult | None:
        s = Session(compactor=compactor, store=":memory:", system=t.system, format="responses")
        try:
            for k, m in enumerate(t.messages):
                if not _model_call(t.messages, k):
                    s.append(m)
                    continue
                r = await s.aprepare()
                assert validate_messages(s.context(), format="responses", system=s.system) == []
                if r is not None and r.summary_source == "provider:openai":
                    return r
                if s.pending is not None:
                    assert await s.pending.await_done(20)
                s.append(m)
            return None
        finally:
            s.close()

    result = asyncio.run(main())
    assert result is not None and result.fallback_reason is None
