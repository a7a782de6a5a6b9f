"""CompactionConfig, ContextCompactor.check, TokenCounter and ConversationState."""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from context_compactor import (
    CompactionConfig,
    ConfigError,
    ContextCompactor,
    ConversationState,
    MessageTypeError,
    SelectiveRule,
    TokenCounter,
    estimate_tokens,
)

# -- configuration ---------------------------------------------------------------------------------


def test_defaults_are_the_design_table() -> None:
    c = CompactionConfig()
    assert (c.max_context_tokens, c.reserve, c.trigger_ratio, c.target_ratio) == (128_000, 8_000, 0.8, 0.5)
    assert c.reserve_tokens is None  # derived: min(8000, max_context_tokens // 4)
    assert (c.keep_first_messages, c.keep_recent_messages, c.keep_recent_tool_results) == (1, 6, 4)
    assert (c.max_tool_arg_chars, c.micro_trigger_ratio, c.clear_at_least_tokens) == (500, 0.5, 2_000)
    assert (c.summary_max_tokens, c.summary_role, c.user_messages_budget_tokens) == (2_000, "user", None)
    # The user's words: 2000 whatever the window; the details scale: min(1500, budget // 2), >= 64.
    assert (c.user_words_token_limit, c.details_token_limit) == (2_000, 1_500)
    small = CompactionConfig(max_context_tokens=2_000)
    assert (small.user_words_token_limit, small.details_token_limit) == (2_000, 750)
    tiny = CompactionConfig(max_context_tokens=160)
    assert (tiny.user_words_token_limit, tiny.details_token_limit) == (2_000, 64)
    assert (c.transcript_item_max_chars, c.summarizer_timeout_s, c.on_summarizer_error) == (2_000, 120, "fallback")
    assert (c.min_savings_ratio, c.cooldown_calls, c.tokenizer) == (0.1, 3, "approx")
    assert (c.message_overhead_tokens, c.image_tokens, c.repair, c.profile) == (4, 1_600, True, None)
    assert c.budget == 120_000
    assert c.soft_threshold == 96_000
    assert c.hard_threshold == 120_000
    assert c.target_tokens == 60_000
    assert [(r.item, r.action, r.priority) for r in c.selective_rules] == [
        ("tool_results", "placeholder", 10),
        ("thinking", "drop", 20),
        ("images", "placeholder", 20),
        ("assistant_text", "head_tail", 30),
        ("user_text", "never", 50),
    ]


def test_presets_follow_seed_000() -> None:
    dev = CompactionConfig.preset("development")
    assert (dev.soft_threshold, dev.hard_threshold, dev.reserve_tokens) == (5_000, 8_000, 2_000)
    assert (dev.keep_recent_messages, dev.summary_max_tokens) == (4, 400)
    prod = CompactionConfig.preset("production", keep_recent_messages=8)
    assert (prod.soft_threshold, prod.hard_threshold, prod.summary_max_tokens) == (15_000, 20_000, 800)
    assert prod.keep_recent_messages == 8
    large = CompactionConfig.preset("large_context")
    assert (large.soft_threshold, large.hard_threshold, large.keep_recent_messages) == (25_000, 30_000, 10)
    with pytest.raises(ConfigError) as e:
        CompactionConfig.preset("huge")
    assert e.value.field == "preset"


def test_from_dict_replace_and_to_dict_round_trip() -> None:
    c = CompactionConfig.from_dict(
        {
            "preset": "production",
            "protected_tools": ["memory", "todo"],
            "selective_rules": [{"item": "tool_results", "action": "placeholder", "priority": 1}],
        }
    )
    assert c.protected_tools == ("memory", "todo")
    assert c.selective_rules == (SelectiveRule("tool_results", "placeholder", 1),)
    assert CompactionConfig.from_dict(c.to_dict()) == c
    d = c.replace(keep_recent_messages=2)
    assert d.keep_recent_messages == 2 and c.keep_recent_messages == 6
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.keep_recent_messages = 3  # type: ignore[misc]


@pytest.mark.parametrize(("window", "reserve"), [(128_000, 8_000), (32_000, 8_000), (20_000, 5_000), (8_000, 2_000)])
def test_reserve_defaults_to_8000_or_a_quarter_of_the_window(window: int, reserve: int) -> None:
    c = ContextCompactor(max_context_tokens=window)  # a small window works without a reserve of its own
    assert c.config.reserve == reserve and c.config.budget == window - reserve
    messages = [{"role": "user", "content": "hello"}]
    assert c.check(messages).budget == window - reserve and c.check(messages).urgency == "none"


def test_a_derived_reserve_stays_derived_and_an_explicit_one_stays_explicit() -> None:
    derived = CompactionConfig()
    assert derived.replace(max_context_tokens=8_000).reserve == 2_000
    assert ContextCompactor(derived, max_context_tokens=8_000).config.budget == 6_000
    assert ContextCompactor().with_config(max_context_tokens=8_000).config.reserve == 2_000
    explicit = CompactionConfig(reserve_tokens=1_000)
    assert explicit.replace(max_context_tokens=8_000).reserve == 1_000
    # Round trips keep the choice: None in to_dict() is "derive it".
    assert derived.to_dict()["reserve_tokens"] is None and explicit.to_dict()["reserve_tokens"] == 1_000
    for c in (derived, explicit):
        back = CompactionConfig.from_dict(c.to_dict())
        assert back == c and back.replace(max_context_tokens=8_000) == c.replace(max_context_tokens=8_000)
    # An explicit reserve of the default's size is still explicit (and compares unequal).
    pinned = CompactionConfig(reserve_tokens=8_000)
    assert pinned.budget == derived.budget and pinned != derived
    with pytest.raises(ConfigError) as e:
        pinned.replace(max_context_tokens=8_000)
    assert e.value.field == "reserve_tokens" and "8000" in str(e.value)
    # Presets keep their own reserve, also with another window.
    assert CompactionConfig.preset("production").reserve_tokens == 4_000
    assert CompactionConfig.preset("production", max_context_tokens=200_000).reserve == 4_000


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"max_context_tokens": 0}, "max_context_tokens"),
        ({"max_context_tokens": "big"}, "max_context_tokens"),
        ({"reserve_tokens": 200_000}, "reserve_tokens"),
        ({"reserve_tokens": -1}, "reserve_tokens"),
        ({"reserve_tokens": "4k"}, "reserve_tokens"),
        ({"max_context_tokens": 8_000, "reserve_tokens": 8_000}, "reserve_tokens"),
        ({"trigger_ratio": 1.5}, "trigger_ratio"),
        ({"trigger_ratio": float("nan")}, "trigger_ratio"),
        ({"target_ratio": 0}, "target_ratio"),
        ({"soft_threshold_tokens": 130_000}, "soft_threshold_tokens"),
        ({"hard_threshold_tokens": 500_000, "soft_threshold_tokens": 10}, "hard_threshold_tokens"),
        ({"keep_recent_messages": -1}, "keep_recent_messages"),
        ({"keep_recent_messages": True}, "keep_recent_messages"),
        ({"summary_role": "assistant"}, "summary_role"),
        ({"on_summarizer_error": "ignore"}, "on_summarizer_error"),
        ({"summarizer_timeout_s": 0}, "summarizer_timeout_s"),
        ({"tokenizer": "gpt2"}, "tokenizer"),
        ({"profile": "cohere"}, "profile"),
        ({"protected_tools": "bash"}, "protected_tools"),
        ({"repair": "yes"}, "repair"),
        ({"no_such_field": 1}, "no_such_field"),
    ],
)
def test_bad_values_name_the_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        CompactionConfig.from_dict(values)
    assert e.value.field == field
    assert isinstance(e.value, ValueError)
    with pytest.raises(ConfigError):
        ContextCompactor(**values)


def test_bad_selective_rule() -> None:
    with pytest.raises(ConfigError) as e:
        SelectiveRule("memes", "drop", 1)
    assert e.value.field == "selective_rules"


# -- check -----------------------------------------------------------------------------------------


def conversation(n: int, text: str = "word " * 50) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for i in range(n):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {text}"})
    return msgs


def test_urgency_follows_the_thresholds() -> None:
    msgs = conversation(10)
    total = TokenCounter().count_messages(msgs)
    c = ContextCompactor(max_context_tokens=total * 10, reserve_tokens=0)
    check = c.check(msgs)
    assert (check.urgency, check.should_compact, check.current_tokens) == ("none", False, total)
    soft = ContextCompactor(max_context_tokens=total + 1, reserve_tokens=0, trigger_ratio=0.5).check(msgs)
    assert soft.urgency == "soft" and soft.should_compact
    assert soft.threshold == (total + 1) // 2
    hard = ContextCompactor(max_context_tokens=total, reserve_tokens=0).check(msgs)
    assert hard.urgency == "hard"
    assert c.should_compact(msgs) is False
    assert hard.budget == total and hard.hard_threshold == total


def test_check_never_raises_for_provider_invalid_input(corpus_dir: Path) -> None:
    path = corpus_dir / "openai" / "mini-swe-agent__test_github_issue.json"
    msgs = json.loads(path.read_text(encoding="utf-8"))
    check = ContextCompactor(max_context_tokens=1_000, reserve_tokens=100).check(msgs)
    assert check.urgency == "hard"
    broken = [{"role": "tool", "tool_call_id": "nope", "content": "orphan"}, {"role": "robot", "content": "?"}]
    assert ContextCompactor().check(broken).urgency == "none"
    with pytest.raises(MessageTypeError):
        ContextCompactor().check([{"role": "user", "content": 3}])


def test_counting_parts() -> None:
    counter = TokenCounter()
    user = {"role": "user", "content": "hello world"}
    assert counter.count_messages([user]) == 4 + estimate_tokens("hello world")
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:..."}}]}
    assert counter.count_messages([image]) == 4 + 1600
    assert TokenCounter(image_tokens=85).count_messages([image]) == 4 + 85
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    with_tools = counter.count_each([user], tools=tools, system="be brief")
    assert with_tools.tools > 0 and with_tools.system > 4
    assert with_tools.total == with_tools.messages[0] + with_tools.system + with_tools.tools


def test_callable_tokenizer() -> None:
    seen: list[str] = []

    def words(text: str) -> int:
        seen.append(text)
        return len(text.split())

    counter = TokenCounter(words)
    assert counter.count("a b c") == 3
    msgs = [{"role": "user", "content": "one two three"}]
    assert counter.count_messages(msgs) == 4 + 3
    c = ContextCompactor(tokenizer=words)
    state = ConversationState()
    c.check(msgs, state=state)
    seen.clear()
    msgs.append({"role": "assistant", "content": "four five"})
    assert c.check(msgs, state=state).current_tokens == 4 + 3 + 4 + 2
    assert seen == ["four five"], "with a state, only the new message is counted"
    with pytest.raises(ConfigError):
        TokenCounter(lambda s: -1).count_messages(msgs)
    with pytest.raises(ConfigError):
        TokenCounter(lambda s: "many").count("x")  # type: ignore[arg-type,return-value]


def test_exact_tokenizer_selected_by_config() -> None:
    c = ContextCompactor(tokenizer="o200k_base")
    assert c.counter.name == "o200k_base"
    assert c.check([{"role": "user", "content": "hello world"}]).current_tokens > 4


# -- ConversationState -------------------------------------------------------------------------------


def test_state_counts_only_what_is_new() -> None:
    c = ContextCompactor()
    state = ConversationState()
    msgs = conversation(200)
    first = c.check(msgs, state=state)
    assert state.last_counted == 201
    msgs.append({"role": "user", "content": "one more"})
    second = c.check(msgs, state=state)
    assert state.last_counted == 1
    assert second.current_tokens == c.check(msgs).current_tokens > first.current_tokens


def test_state_cache_survives_in_place_edits_and_id_reuse() -> None:
    c = ContextCompactor()
    state = ConversationState()
    msgs = conversation(20)
    c.check(msgs, state=state)
    # In place: the same dict object, new content.
    msgs[5]["content"] = "much longer text " * 100
    assert c.check(msgs, state=state).current_tokens == c.check(msgs).current_tokens
    assert state.last_counted == 1
    # Nested in-place edit of a content part list.
    msgs[6]["content"] = [{"type": "text", "text": "short"}]
    c.check(msgs, state=state)
    msgs[6]["content"][0]["text"] = "a far longer replacement text " * 30
    assert c.check(msgs, state=state).current_tokens == c.check(msgs).current_tokens
    # Freed and re-created objects (ids get reused) with different content.
    for _ in range(50):
        del msgs[-1]
        msgs.append({"role": "assistant", "content": "x " * (len(msgs) % 7 + 1)})
        assert c.check(msgs, state=state).current_tokens == c.check(msgs).current_tokens


def test_state_does_not_mutate_input_and_is_shared_safely() -> None:
    c = ContextCompactor()
    state = ConversationState()
    msgs = conversation(50)
    before = copy.deepcopy(msgs)
    expected = c.check(msgs).current_tokens
    results: list[int] = []

    def worker() -> None:
        for _ in range(20):
            results.append(c.check(msgs, state=state).current_tokens)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results) == {expected}
    assert msgs == before


def test_calibration_from_usage_objects() -> None:
    from anthropic.types import Usage as AnthropicUsage
    from openai.types import CompletionUsage

    c = ContextCompactor()
    msgs = conversation(40)
    state = ConversationState()
    raw = c.check(msgs, state=state).raw_tokens
    assert state.observe_usage(CompletionUsage(prompt_tokens=raw // 2, completion_tokens=5, total_tokens=0))
    assert state.calibration == pytest.approx(0.5, abs=0.01)
    assert c.check(msgs, state=state).current_tokens == pytest.approx(raw * 0.5, rel=0.01)

    anth = ConversationState()
    c.check(msgs, state=anth)
    usage = AnthropicUsage(
        input_tokens=raw // 4, output_tokens=1, cache_read_input_tokens=raw // 2, cache_creation_input_tokens=raw // 4
    )
    assert anth.observe_usage(usage, messages=msgs)
    assert anth.calibration == pytest.approx(1.0, abs=0.02), "cache reads and writes are prompt tokens too"

    bounded = ConversationState()
    c.check(msgs, state=bounded)
    bounded.observe_usage(raw * 100)
    assert bounded.calibration == 2.0
    bounded.observe_usage({"prompt_tokens": 1})  # too small to learn from
    assert bounded.observations == 1

    fresh = ConversationState()
    assert fresh.observe_usage(5_000) is False, "nothing measured yet"
    with pytest.raises(MessageTypeError):
        fresh.observe_usage("lots")
    with pytest.raises(MessageTypeError):
        fresh.observe_usage({"prompt_tokens": -5})
    fresh.reset()
    assert fresh.calibration == 1.0


def _long_conversation(corpus: dict[str, list[dict[str, Any]]], n: int) -> list[dict[str, Any]]:
    """``n`` messages: the corpus's user and assistant text messages again and again (valid enough
    to count; counting never needs a valid request)."""
    pool = [m for conv in corpus.values() for m in conv if isinstance(m.get("content"), str)]
    return [copy.deepcopy(pool[i % len(pool)]) for i in range(n)]


@pytest.mark.parametrize("tokenizer", ["approx", "o200k_base"])
def test_long_conversations_count_the_same_as_message_by_message(
    openai_corpus: dict[str, list[dict[str, Any]]], tokenizer: str
) -> None:
    # Above a few hundred messages, messages are counted on the pool while later ones are still
    # being read: the counts must be those of each message alone, in order.
    conv = _long_conversation(openai_corpus, 1_500)
    counter = TokenCounter(tokenizer)
    each = counter.count_each(conv)
    alone = [counter.count_each([m]).total for m in conv]
    assert list(each.messages) == alone
    comp = ContextCompactor(tokenizer=tokenizer)
    assert comp.check(conv).current_tokens == sum(alone)
    assert comp.micro_compact(conv).tokens_before == sum(alone)


def test_a_bad_message_deep_in_a_long_conversation_is_named() -> None:
    conv: list[Any] = [{"role": "user", "content": f"message {i}"} for i in range(2_000)]
    conv[1_337] = {"role": "user", "content": 42}
    for call in (ContextCompactor().check, ContextCompactor().micro_compact, TokenCounter().count_each):
        with pytest.raises(MessageTypeError) as e:
            call(conv)
        assert e.value.index == 1_337
        assert e.value.field == "content"
