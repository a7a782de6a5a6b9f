"""One source of truth across the boundary, and what a newcomer tripped over there: the shell
detects formats with the core's detection; a forced format that does not fit the messages is
refused, naming the detected one; the token functions raise the package's own type error."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from _messages import conversation
from context_compactor import (
    ConfigError,
    ContextCompactor,
    FormatMismatchError,
    MessageTypeError,
    _core,
    count_tokens,
    detect_format,
    estimate_tokens,
    validate_messages,
)
from context_compactor.cli import main
from context_compactor.io import load, loads, save

OPENAI = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hi."},
    {"role": "assistant", "content": "Hi."},
]
PLAIN = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi."}]
GEMINI = [{"role": "user", "parts": [{"text": "Say hi."}]}, {"role": "model", "parts": [{"text": "Hi."}]}]
# A conversation continued after Anthropic's compaction: its only Anthropic feature is the block.
COMPACTED = [
    {"role": "assistant", "content": [{"type": "compaction", "content": "The user asked for a greeting."}]},
    {"role": "user", "content": "Say hi again."},
]


# -- io uses the core's detection ------------------------------------------------------------------


def test_a_list_whose_only_anthropic_feature_is_a_compaction_block_loads_as_anthropic() -> None:
    assert detect_format(COMPACTED) == "anthropic"
    t = loads(json.dumps(COMPACTED))
    assert t.format == "anthropic"
    assert validate_messages(t.messages, format=t.format) == []


def test_save_detects_like_the_core(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    save(path, COMPACTED)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == {"system": None, "messages": COMPACTED}, "written as an Anthropic request"
    assert load(path).format == "anthropic"


@pytest.mark.parametrize(
    "messages", [OPENAI, PLAIN, GEMINI, COMPACTED], ids=["openai", "plain", "gemini", "compaction"]
)
def test_io_and_the_core_agree(messages: list[dict[str, Any]]) -> None:
    assert loads(json.dumps(messages)).format == detect_format(messages)


def test_the_format_list_is_the_cores() -> None:
    assert _core.FORMATS == ("openai", "anthropic", "responses", "gemini")
    with pytest.raises(ValueError, match="format must be"):
        loads(json.dumps(PLAIN), format="bedrock")  # type: ignore[arg-type]


# -- a forced format that does not fit is refused --------------------------------------------------


def test_forcing_gemini_on_openai_messages_is_refused_naming_the_detected_format() -> None:
    compactor = ContextCompactor(max_context_tokens=1000)
    with pytest.raises(FormatMismatchError) as e:
        compactor.compact(OPENAI, format="gemini", force=True)
    assert e.value.format == "gemini" and e.value.detected == "openai" and e.value.field == "format"
    assert isinstance(e.value, ConfigError) and 'detected as "openai"' in str(e.value)
    with pytest.raises(FormatMismatchError):
        compactor.plan(PLAIN, format="gemini", force=True)
    copy = pickle.loads(pickle.dumps(e.value))
    assert (copy.format, copy.detected, str(copy)) == ("gemini", "openai", str(e.value))


def test_forcing_a_chat_format_on_gemini_contents_is_refused() -> None:
    compactor = ContextCompactor(max_context_tokens=1000)
    for forced in ("openai", "anthropic", "responses"):
        with pytest.raises(FormatMismatchError) as e:
            compactor.compact(GEMINI, format=forced, force=True)
        assert e.value.detected == "gemini", forced


def test_a_role_the_forced_format_lacks_is_repaired_not_refused() -> None:
    # A system message in the list: OpenAI has it, Anthropic's list does not; the repair makes it
    # a user message and says so (tests/test_hostile_input.py has the whole case).
    r = ContextCompactor(max_context_tokens=1000).compact(OPENAI, format="anthropic")
    assert validate_messages(r.messages, format="anthropic") == [] and r.repairs


def test_compact_many_refuses_per_conversation() -> None:
    compactor = ContextCompactor(max_context_tokens=1000)
    items = [{"messages": OPENAI, "format": "gemini"}, PLAIN]
    out = compactor.compact_many(items, return_exceptions=True, force=True)
    assert isinstance(out[0], FormatMismatchError) and out[0].detected == "openai"
    assert not isinstance(out[1], BaseException)


@pytest.mark.parametrize("forced", ["openai", "anthropic", "responses"])
def test_a_forced_format_that_fits_is_still_taken(forced: str) -> None:
    # Type-less {role, content: str} items are the same request in all three.
    messages = conversation(12)[1:]  # no system message: Anthropic's list has none
    messages = [m for m in messages if m["role"] in ("user", "assistant") and isinstance(m.get("content"), str)]
    r = ContextCompactor(max_context_tokens=4000).compact(messages, format=forced, force=True)
    assert r.tokens_after <= r.tokens_before


def test_validation_reports_a_mismatch_instead_of_refusing_it() -> None:
    problems = validate_messages(OPENAI, format="anthropic")
    assert [p.rule for p in problems] == ["invalid_role"]


def test_the_cli_refuses_a_forced_format_that_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "openai.json"
    path.write_text(json.dumps(OPENAI), encoding="utf-8")
    assert main(["compact", str(path), "--format", "gemini", "--max-tokens", "1000", "--force"]) == 2
    err = capsys.readouterr().err
    assert 'detected as "openai"' in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# -- the token functions' type errors --------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 42, b"bytes"])
def test_token_functions_raise_message_type_error_for_a_non_str(value: Any) -> None:
    for fn in (estimate_tokens, count_tokens):
        with pytest.raises(MessageTypeError) as e:
            fn(value)
        assert e.value.field == "text" and e.value.index is None
        assert isinstance(e.value, TypeError) and type(value).__name__ in str(e.value)


# -- a compaction never returns more than the repaired input ---------------------------------------


@pytest.mark.parametrize("window", [2000, 8000, 50000])
@pytest.mark.parametrize("turns", [1, 3, 8])
def test_a_forced_compaction_never_returns_more_than_the_repaired_input(window: int, turns: int) -> None:
    compactor = ContextCompactor(max_context_tokens=window)
    messages = conversation(turns)
    repaired = compactor.compact(messages).tokens_after  # under the threshold: the input as repaired
    forced = compactor.compact(messages, force=True)
    assert forced.tokens_after <= max(repaired, forced.tokens_before)


def test_what_a_repair_adds_is_listed() -> None:
    r = ContextCompactor(max_context_tokens=1000).compact([*COMPACTED[1:], {"role": "assistant", "content": "Hi."}])
    assert r.repairs == () and r.tokens_after == r.tokens_before
    r = ContextCompactor(max_context_tokens=1000).compact([{"role": "assistant", "content": "Hi."}], format="anthropic")
    assert r.tokens_after > r.tokens_before and len(r.repairs) == 1 and "inserted a user message" in r.repairs[0]
