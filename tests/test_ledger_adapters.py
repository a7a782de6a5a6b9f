"""Each framework adapter carries the ledger like the dict API: the same conversation, in the
framework's own message objects, compacted three times (forced, a paraphrasing summarizer,
``min_savings_ratio=0``) keeps the user's instruction verbatim after the ledger's sentinel, and
hands back the framework's own types."""

from __future__ import annotations

from typing import Any

import pytest

import sweep
from context_compactor import ContextCompactor
from test_ledger import RULE, SENTINEL, conversation, paraphrase


def _case() -> sweep.Case:
    return sweep.Case("ledger", "openai", conversation(), None, None)


def _compactor() -> ContextCompactor:
    return ContextCompactor(max_context_tokens=8000, min_savings_ratio=0, summarizer=paraphrase)


def _ledger(text: str) -> str:
    assert text.count(SENTINEL) == 1, text
    return text[text.index(SENTINEL) :]


def _chain(messages: list[Any], **kw: Any) -> list[str]:
    """Three forced compactions; the ledger of each summary."""
    c = _compactor()
    out = []
    for _ in range(3):
        r = c.compact(messages, force=True, **kw)
        assert r.summary is not None and r.strategy != "none"
        out.append(_ledger(r.summary))
        messages = r.messages
    assert RULE in out[0] and out[0] == out[1] == out[2]
    return out


def test_langchain_messages_carry_the_ledger() -> None:
    pytest.importorskip("langchain_core", reason="the [langchain] extra is not installed")
    from langchain_core.messages import BaseMessage, HumanMessage

    from _frameworks import to_langchain

    msgs = to_langchain(_case())
    c = _compactor()
    ledgers = []
    for _ in range(3):
        r = c.compact(msgs, force=True)
        assert all(isinstance(m, BaseMessage) for m in r.messages)
        summary = [m for m in r.messages if isinstance(m, HumanMessage) and SENTINEL in str(m.content)]
        assert len(summary) == 1
        ledgers.append(_ledger(str(summary[0].content)))
        msgs = r.messages
    assert RULE in ledgers[0] and ledgers[0] == ledgers[1] == ledgers[2]


def test_pydantic_ai_history_processor_carries_the_ledger() -> None:
    pytest.importorskip("pydantic_ai", reason="the [pydantic-ai] extra is not installed")
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from _frameworks import to_pydantic_ai

    msgs = to_pydantic_ai(_case())
    c = _compactor()
    ledgers = []
    for _ in range(3):
        r = c.compact(msgs, force=True)
        parts = [
            p
            for m in r.messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart) and SENTINEL in str(p.content)
        ]
        assert len(parts) == 1
        ledgers.append(_ledger(str(parts[0].content)))
        msgs = r.messages
    assert RULE in ledgers[0] and ledgers[0] == ledgers[1] == ledgers[2]


def test_agents_sdk_items_carry_the_ledger() -> None:
    pytest.importorskip("agents", reason="openai-agents is not installed (extra [agents])")
    from agents.items import TResponseInputItem
    from pydantic import TypeAdapter

    from _responses import to_responses

    items = to_responses(conversation())
    adapter: Any = TypeAdapter(list[TResponseInputItem])
    items = adapter.dump_python(adapter.validate_python(items), mode="json")
    _chain(items, format="responses")


def test_gemini_contents_carry_the_ledger() -> None:
    pytest.importorskip("google.genai", reason="google-genai is not installed (the [gemini] extra)")
    from google.genai import types

    from _gemini import as_types, to_gemini

    contents, _ = to_gemini(conversation(), "openai")
    msgs = as_types(contents)
    c = _compactor()
    ledgers = []
    for _ in range(3):
        r = c.compact(msgs, force=True)
        assert all(isinstance(m, types.Content) for m in r.messages)
        texts = [p.text for m in r.messages for p in (m.parts or []) if p.text and SENTINEL in p.text]
        assert len(texts) == 1
        ledgers.append(_ledger(texts[0]))
        msgs = r.messages
    assert RULE in ledgers[0] and ledgers[0] == ledgers[1] == ledgers[2]
