"""A LangChain conversation counts exactly what its Chat Completions copy counts.

The Rust reader writes each call's ``args`` dict as compact JSON to count it (the copy holds
``json.dumps(args, ensure_ascii=False, separators=(",", ":"))`` as its ``arguments``), so every
count of the LangChain objects, message by message, must equal the copy's: on the whole corpus
(cold, long enough to be counted while read on the pool, and warm through a state), with the
estimate and the exact tokenizer, and for arbitrary argument values whose strings put escapes,
non-ASCII text and every string layout (ASCII, Latin-1, UCS-2, UCS-4) on either side of the
writer's 16-unit blocks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the [langchain] extra is not installed (it needs Python >= 3.11)")

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import _frameworks as frameworks
import sweep
from _hypothesis_profiles import examples
from conftest import corpus_or_skip
from context_compactor import ContextCompactor, ConversationState, TokenCounter

FRAME = frameworks.FRAMES["langchain"]


@pytest.fixture(scope="module")
def corpus_pair() -> tuple[list[Any], list[dict[str, Any]]]:
    """Every corpus conversation as LangChain messages, one after another, and the dict copy."""
    corpus_or_skip()
    objs: list[Any] = []
    for case in sweep.load_cases():
        objs += FRAME.build(case)
    dicts = [FRAME.as_dict(m) for m in objs]
    assert len(objs) > 1000 and sum(bool(getattr(m, "tool_calls", None)) for m in objs) > 100
    return objs, dicts


@pytest.mark.parametrize("tokenizer", ["approx", "o200k_base"])
def test_the_corpus_counts_as_its_chat_completions_copy_message_by_message(
    corpus_pair: tuple[list[Any], list[dict[str, Any]]], tokenizer: str
) -> None:
    objs, dicts = corpus_pair
    counter = TokenCounter(tokenizer)
    expected = counter.count_each(dicts).messages
    got = counter.count_each(objs).messages
    # Every message, the 2 with an Anthropic `image` block too (sized from its base64 header in
    # both readers).
    assert sum(_has_image(m.content) for m in objs) >= 1
    assert got == expected
    # Short lists are read, then counted (no pool): the same counts.
    assert counter.count_each(objs[:300]).messages == got[:300]


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "image" for b in content)


def test_warm_checks_count_as_the_cold_one(corpus_pair: tuple[list[Any], list[dict[str, Any]]]) -> None:
    objs, dicts = corpus_pair
    compactor = ContextCompactor()
    state = ConversationState()
    half = len(objs) // 2
    compactor.check(objs[:half], state=state)
    warm = compactor.check(objs, state=state).current_tokens
    assert warm == compactor.check(objs).current_tokens
    assert warm == compactor.check(dicts).current_tokens


# Strings that hit every escape and every layout: quotes, backslashes, newlines, tabs and other
# controls (not \b and \f: `json.dumps` writes those as short escapes, the reader as \u0008 and
# \u000c, as the provider's JSON does), Latin-1, CJK and astral characters; no lone surrogates.
_CHARS = st.one_of(
    st.sampled_from([*'"\\\n\r\t\x00\x01\x1f\x7f', "é", "ÿ", "中", "→", "🙂", "𠀀"]),
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\b\f"),
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
)
_TEXT = st.text(_CHARS, max_size=70)
_SCALAR = st.one_of(
    _TEXT, st.integers(-(10**20), 10**20), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none()
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=examples(2))
@given(args=st.dictionaries(_TEXT, _VALUE, max_size=6), text=_TEXT)
def test_any_arguments_count_as_their_json_copy(args: dict[str, Any], text: str) -> None:
    lc = [
        HumanMessage(text or "go"),
        AIMessage(content=text, tool_calls=[{"name": "edit", "args": args, "id": "call_1"}]),
        ToolMessage(text, tool_call_id="call_1"),
    ]
    arguments = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    assert [FRAME.as_dict(m) for m in lc][1]["tool_calls"][0]["function"]["arguments"] == arguments
    dicts = [FRAME.as_dict(m) for m in lc]
    for tokenizer in ("approx", "o200k_base"):
        counter = TokenCounter(tokenizer)
        assert counter.count_each(lc).messages == counter.count_each(dicts).messages
