"""Native compaction strategies through the real openai / anthropic SDKs against a 127.0.0.1 stub."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import anthropic
import openai
import pytest

from _messages import conversation
from _native_stub import BETA, NativeStub
from _responses import to_responses
from conftest import claude_code_corpus_files, corpus_or_skip
from context_compactor import SUMMARY_MARKER, CompactionConfig, ContextCompactor, io, validate_messages
from context_compactor.summarizers import anthropic_compaction, openai_responses_compact

CONFIG = CompactionConfig(max_context_tokens=12_000, reserve_tokens=1_000)
TASK = "Fix the failing test in /srv/app/billing/tax.py please."


@pytest.fixture()
def stub() -> Any:
    with NativeStub() as s:
        yield s


def _openai(stub: NativeStub, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.url("/v1"), api_key="test", max_retries=0, **kw)


def _anthropic(stub: NativeStub, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stub.url(), api_key="test", max_retries=0, **kw)


def anthropic_run(turns: int = 30, task: str = TASK) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(turns):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}: " + "I looked at the rounding rules in /srv/app/x.py. " * 20},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"cmd": f"cat f{i}.py"}},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"l{i}\n" * 200}],
            }
        )
    msgs.append({"role": "assistant", "content": "Done: the ZeroDivisionError is fixed."})
    return msgs


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    return " ".join(str(p.get("text") or p.get("content") or "") for p in c or () if isinstance(p, dict))


# -- OpenAI -------------------------------------------------------------------------------------------


def test_openai_compact_places_the_items(stub: NativeStub) -> None:
    items = to_responses(conversation(30))
    before = copy.deepcopy(items)
    result = ContextCompactor(CONFIG, summarizer=openai_responses_compact(_openai(stub), "gpt-5.4")).compact(items)
    assert items == before  # input not mutated
    assert result.summary_source == "provider:openai" and result.fallback_reason is None
    assert validate_messages(result.messages) == []
    assert result.tokens_after < result.tokens_before
    kinds = [m.get("type") for m in result.messages]
    assert kinds.count("compaction") == 1
    at = kinds.index("compaction")
    # The system prompt and the task are kept before the provider's items, untouched.
    assert any(_text(m) == TASK or TASK in _text(m) for m in result.messages[:at])
    # The stub got the span as Responses items through the SDK, and only that.
    [(path, _, body)] = stub.requests
    assert path == "/v1/responses/compact" and body["model"] == "gpt-5.4"
    assert all("type" in i or "role" in i for i in body["input"])
    # Facts the encrypted item cannot show follow it in our ledger message (the marker, the
    # ledger's sentinel, its preserved details).
    after = _text(result.messages[at + 1])
    assert after.startswith(SUMMARY_MARKER) and "[context-compactor ledger v1]" in after
    assert "Preserved details:" in after
    assert result.must_keep_missing == ()


def test_openai_compact_carries_the_ledger_and_never_sends_it(stub: NativeStub) -> None:
    """Our ledger message follows the provider's items, is left out of the span sent to the
    provider next time, and is carried again after the new items."""
    from test_ledger import RULE, SENTINEL
    from test_ledger import conversation as with_rule

    compactor = ContextCompactor(CONFIG, summarizer=openai_responses_compact(_openai(stub), "gpt-5.4"))
    first = compactor.compact(to_responses(with_rule(12)), force=True)
    assert first.summary_source == "provider:openai"
    ours = [m for m in first.messages if _text(m).startswith(SUMMARY_MARKER)]
    assert len(ours) == 1 and RULE in _text(ours[0]).split(SENTINEL)[1]
    more = to_responses(with_rule(8, said_at=99))[1:]
    second = compactor.compact([*first.messages, *more], force=True)
    assert second.summary_source == "provider:openai", second.fallback_reason
    sent = stub.requests[-1][2]["input"]
    assert not any(SUMMARY_MARKER in _text(i) for i in sent if isinstance(i, dict))
    ours = [m for m in second.messages if _text(m).startswith(SUMMARY_MARKER)]
    assert len(ours) == 1 and RULE in _text(ours[0]).split(SENTINEL)[1]
    assert validate_messages(second.messages) == []


def test_openai_async_client(stub: NativeStub) -> None:
    client = openai.AsyncOpenAI(base_url=stub.url("/v1"), api_key="test", max_retries=0)
    compactor = ContextCompactor(CONFIG, summarizer=openai_responses_compact(client, "gpt-5.4"))
    result = asyncio.run(compactor.acompact(to_responses(conversation(30))))
    assert result.summary_source == "provider:openai"
    assert validate_messages(result.messages) == []


@pytest.mark.parametrize(
    ("status", "delay"), [(400, 0.0), (404, 0.0), (500, 0.0), (200, 2.0)], ids=["400", "404", "500", "slow"]
)
def test_openai_failure_falls_back(stub: NativeStub, status: int, delay: float) -> None:
    if status != 200:
        stub.fail = (status, {"error": {"message": f"stub {status}", "type": "invalid_request_error"}})
    stub.delay = delay
    summarize = openai_responses_compact(_openai(stub, timeout=0.3), "gpt-5.4")
    items = to_responses(conversation(30))
    result = ContextCompactor(CONFIG, summarizer=summarize).compact(items)
    assert result.summary_source == "rule" and result.compacted
    assert result.fallback_reason is not None and "ProviderCompactionError" in result.fallback_reason
    assert validate_messages(result.messages) == []
    assert any(TASK in _text(m) for m in result.messages)


def test_openai_chat_messages_fall_back_without_a_call(stub: NativeStub) -> None:
    result = ContextCompactor(CONFIG, summarizer=openai_responses_compact(_openai(stub), "gpt-5.4")).compact(
        conversation(30)
    )
    assert result.summary_source == "rule" and "not Responses items" in (result.fallback_reason or "")
    assert stub.requests == []


def test_openai_reserved_params() -> None:
    with pytest.raises(TypeError, match="input"):
        openai_responses_compact(openai.OpenAI(api_key="x"), "gpt-5.4", input=[])


# -- Anthropic ----------------------------------------------------------------------------------------


def test_anthropic_compaction_opens_the_conversation(stub: NativeStub) -> None:
    msgs = anthropic_run()
    summarize = anthropic_compaction(_anthropic(stub), "claude-test")
    result = ContextCompactor(CONFIG, summarizer=summarize).compact(msgs, system="You are a coding agent.")
    assert result.summary_source == "provider:anthropic" and result.fallback_reason is None
    assert validate_messages(result.messages, format="anthropic", system="You are a coding agent.") == []
    first = result.messages[0]
    assert first["role"] == "assistant" and first["content"][0]["type"] == "compaction"
    assert first["content"][0]["signature"] == "sig-stub"  # round-tripped verbatim
    [(path, headers, body)] = stub.requests
    assert path == "/v1/messages" and BETA in headers["anthropic-beta"]
    assert body["compaction"] == {"type": "summarize"} and body["messages"][0]["role"] == "user"
    # The stub's block starts with the first user text it saw (the span's): the task is re-sent
    # unless the block holds its opening words.
    holds_task = TASK in first["content"][0]["content"]
    assert holds_task or result.messages[1] == msgs[0]
    assert result.tokens_after < result.tokens_before


def test_anthropic_task_not_in_block_is_resent(stub: NativeStub) -> None:
    task = "请修复 /srv/app/billing/tax.py 里失败的测试，注意四舍五入。"
    msgs = anthropic_run(task=task)
    result = ContextCompactor(CONFIG, summarizer=anthropic_compaction(_anthropic(stub), "claude-x")).compact(msgs)
    assert result.summary_source == "provider:anthropic"
    assert task not in result.messages[0]["content"][0]["content"]
    assert result.messages[1] is msgs[0]  # the task, re-sent as it was
    assert validate_messages(result.messages, format="anthropic") == []


@pytest.mark.parametrize(("status", "delay"), [(400, 0.0), (500, 0.0), (200, 2.0)], ids=["400", "500", "slow"])
def test_anthropic_failure_falls_back(stub: NativeStub, status: int, delay: float) -> None:
    if status != 200:
        stub.fail = (status, {"type": "error", "error": {"type": "api_error", "message": f"stub {status}"}})
    stub.delay = delay
    summarize = anthropic_compaction(_anthropic(stub, timeout=0.3), "claude-x")
    result = ContextCompactor(CONFIG, summarizer=summarize).compact(anthropic_run())
    assert result.summary_source == "rule"
    assert "ProviderCompactionError" in (result.fallback_reason or "")
    assert validate_messages(result.messages, format="anthropic") == []
    assert result.messages[0]["content"] == TASK


def test_anthropic_async_client(stub: NativeStub) -> None:
    client = anthropic.AsyncAnthropic(base_url=stub.url(), api_key="test", max_retries=0)
    result = asyncio.run(
        ContextCompactor(CONFIG, summarizer=anthropic_compaction(client, "claude-x")).acompact(anthropic_run())
    )
    assert result.summary_source == "provider:anthropic"
    assert validate_messages(result.messages, format="anthropic") == []


# -- the real corpus ----------------------------------------------------------------------------------


def test_real_codex_rollout_through_responses_compact(stub: NativeStub) -> None:
    corpus = corpus_or_skip()
    t = io.load(corpus / "responses" / "codex-session-viewer_example.jsonl")
    summarize = openai_responses_compact(_openai(stub), "gpt-5.4")
    result = ContextCompactor(CONFIG, summarizer=summarize).compact(t.messages, system=t.system, force=True)
    assert result.summary_source == "provider:openai", result.fallback_reason
    assert validate_messages(result.messages, format="responses", system=t.system) == []
    assert [m.get("type") for m in result.messages].count("compaction") == 1
    task = next(k for k, m in enumerate(t.messages) if m.get("role") == "user")
    # The task is kept (shortened to task_max_tokens here: a 5.7k-token AGENTS.md), before the item.
    assert result.origins[0] in (("kept", task), ("edited", task))
    assert result.messages[0]["content"][0]["type"] == "input_text"
    # Every user message the provider was sent comes back (the stub's rule), as a Responses item.
    [(_, _, body)] = stub.requests
    sent_users = sum(1 for i in body["input"] if i.get("role") == "user")
    assert sum(1 for m in result.messages if m.get("id", "").startswith("msg_u")) == sent_users


@pytest.mark.parametrize("name", [p.name for p in claude_code_corpus_files()])
def test_real_claude_code_sessions_through_anthropic_compaction(stub: NativeStub, name: str) -> None:
    corpus = corpus_or_skip()
    t = io.load(corpus / "claude-code" / name)
    summarize = anthropic_compaction(_anthropic(stub), "claude-test")
    result = ContextCompactor(CONFIG, summarizer=summarize).compact(t.messages, system=t.system, force=True)
    if result.summary_source != "provider:anthropic":
        # Only a span the planner could not cut may fall back; it is then the local summary.
        assert result.summary_source in ("rule", None) and result.fallback_reason is None, result.fallback_reason
        return
    assert validate_messages(result.messages, format="anthropic", system=t.system) == []
    assert result.messages[0]["content"][0]["type"] == "compaction"
    task = t.messages[0]
    block = result.messages[0]["content"][0]["content"]
    assert any(m is task for m in result.messages[1:3]) or " ".join(str(task["content"]).split())[:60] in block
