"""Hostile input the provider would refuse, and arguments of the wrong shape, at every entry point.

An unknown role or a malformed content block is reported by ``validate_messages`` (index, rule),
repaired by ``compact()``/``plan()`` (rewritten or dropped, listed in ``result.repairs`` and named
in ``result.record``), refused with ``repair=False``, and refused by ``Session.append`` (which
stores what it is given). Wrong shapes raise the library's typed errors naming the index and
field: never ``RecursionError``, never a string or dict iterated as a list of messages.
"""

from __future__ import annotations

from typing import Any

import pytest

from context_compactor import (
    ConfigError,
    ContextCompactor,
    ConversationState,
    InvalidConversationError,
    MessageTypeError,
    validate_messages,
)
from context_compactor.session import Session

U = {"role": "user", "content": "Fix the bug in /srv/app/main.py."}
A = {"role": "assistant", "content": "Done."}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(cid: str | None, name: str | None = "bash") -> dict[str, Any]:
    b: dict[str, Any] = {"type": "tool_use", "input": {"cmd": "ls"}}
    if cid is not None:
        b["id"] = cid
    if name is not None:
        b["name"] = name
    return b


def tool_result(cid: str | None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "tool_result", "content": "ok"}
    if cid is not None:
        b["tool_use_id"] = cid
    return b


# (name, messages, format, index of the problem, a check of the repaired messages)
CASES: list[tuple[str, list[dict[str, Any]], str, int, Any]] = [
    (
        "unknown role (openai)",
        [U, {"role": "wizard", "content": "abracadabra"}, A],
        "openai",
        1,
        lambda out: out[1]["role"] == "user" and out[1]["content"] == [text("abracadabra")],
    ),
    (
        "unknown role (anthropic)",
        [U, {"role": "wizard", "content": [text("abracadabra")]}, A],
        "anthropic",
        1,
        lambda out: (
            [m["role"] for m in out] == ["user", "user", "assistant"] and out[1]["content"] == [text("abracadabra")]
        ),
    ),
    (
        "system role inside Anthropic's list",
        [U, {"role": "system", "content": "be brief"}, A],
        "anthropic",
        1,
        lambda out: out[1] == {"role": "user", "content": [text("be brief")]},
    ),
    (
        "text block without text, next to a good one",
        [{"role": "user", "content": [{"type": "text"}, text("hello")]}, A],
        "openai",
        0,
        lambda out: out[0]["content"] == [text("hello")],
    ),
    (
        "text block whose text is None",
        [U, {"role": "assistant", "content": [text("a"), {"type": "text", "text": None}]}],
        "anthropic",
        1,
        lambda out: out[1]["content"] == [text("a")],
    ),
    (
        "a message of malformed blocks only",
        [U, {"role": "assistant", "content": [{"type": "text"}]}, {"role": "user", "content": "go on"}],
        "anthropic",
        1,
        lambda out: [m["content"] for m in out] == [U["content"], "go on"],
    ),
    (
        "block without type but with text",
        [{"role": "user", "content": [{"text": "hello"}]}, A],
        "openai",
        0,
        lambda out: out[0]["content"] == [text("hello")],
    ),
    (
        "block without type or text",
        [{"role": "user", "content": [{"foo": "bar"}, text("hi")]}, A],
        "anthropic",
        0,
        lambda out: out[0]["content"] == [text("hi")],
    ),
    (
        "tool_use without id (and its result)",
        [
            U,
            {"role": "assistant", "content": [text("run"), tool_use(None)]},
            {"role": "user", "content": [tool_result(None)]},
        ],
        "anthropic",
        1,
        lambda out: out[1]["content"] == [text("run")] and len(out) == 2,
    ),
    (
        "tool_use without name",
        [
            U,
            {"role": "assistant", "content": [text("run"), tool_use("t1", None)]},
            {"role": "user", "content": [tool_result("t1")]},
        ],
        "anthropic",
        1,
        lambda out: out[1]["content"] == [text("run")],
    ),
    (
        "tool_result without tool_use_id",
        [U, {"role": "assistant", "content": [tool_use("t1")]}, {"role": "user", "content": [tool_result(None)]}, A],
        "anthropic",
        2,
        lambda out: out[2]["content"][0]["tool_use_id"] == "t1" and out[2]["content"][0]["is_error"],
    ),
    (
        "image without source",
        [{"role": "user", "content": [{"type": "image"}, text("see")]}, A],
        "anthropic",
        0,
        lambda out: out[0]["content"] == [text("see")],
    ),
    (
        "image_url part without image_url",
        [{"role": "user", "content": [text("see"), {"type": "image_url"}]}, A],
        "openai",
        0,
        lambda out: out[0]["content"] == [text("see")],
    ),
    (
        "thinking block without thinking",
        [U, {"role": "assistant", "content": [{"type": "thinking", "signature": "s"}, text("ok")]}],
        "anthropic",
        1,
        lambda out: out[1]["content"] == [text("ok")],
    ),
]


@pytest.mark.parametrize("name,messages,fmt,index,check", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("entry", ["compact", "plan"])
def test_invalid_input_is_reported_repaired_and_refused_without_repair(
    name: str, messages: list[dict[str, Any]], fmt: str, index: int, check: Any, entry: str
) -> None:
    problems = validate_messages(messages, format=fmt)
    assert [(p.index, p.rule) for p in problems][:1] == [
        (index, "invalid_role" if "role" in name else "malformed_block")
    ], problems
    c = ContextCompactor()
    r = c.compact(messages, format=fmt) if entry == "compact" else c.plan(messages, format=fmt).apply(None)
    assert r.messages != messages, "an invalid request was returned as it is"
    assert validate_messages(r.messages, format=fmt) == [], r.messages
    assert check(r.messages), r.messages
    assert r.repairs and any(f"message {index}:" in line for line in r.repairs), r.repairs
    assert index in {e.index for e in r.record} and r.changed
    with pytest.raises(InvalidConversationError) as e:
        c.with_config(repair=False).compact(messages, format=fmt)
    assert (index, problems[0].rule) in [(p.index, p.rule) for p in e.value.problems]
    # check() never raises for provider-invalid input.
    assert c.check(messages, format=fmt).message_count == len(messages)


def test_problems_name_the_block_and_the_missing_field() -> None:
    (p,) = validate_messages([{"role": "user", "content": [text("a"), {"type": "text"}]}])
    assert (p.index, p.rule) == (0, "malformed_block") and 'content[1] has no "text"' in p.message
    (p,) = validate_messages([U, {"role": "assistant", "content": [tool_use("t", None)]}], format="anthropic")
    assert (p.index, p.rule) == (1, "malformed_block") and '"name"' in p.message
    (p,) = validate_messages([{"role": "wizard", "content": "x"}])
    assert p.rule == "invalid_role" and "unknown role" in p.message


def test_repairs_are_recorded_in_plain_words() -> None:
    r = ContextCompactor().compact(
        [U, {"role": "wizard", "content": "x"}, {"role": "user", "content": [{"type": "text"}]}]
    )
    assert r.repairs == (
        "message 1: openai has no such message role: sent as a user message",
        'message 2: dropped content[0]: it has no "text"',
        "message 2: dropped the message: nothing valid was left in it",
    )
    assert [(e.index, e.action) for e in r.record] == [(1, "repaired"), (2, "repaired"), (2, "dropped")]
    assert r.messages[0] is U  # what needs no repair is the same object


# -- arguments of the wrong shape ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", {"role": "user", "content": "x"}, 5, None, b"xyz"], ids=repr)
def test_a_str_or_dict_is_never_read_as_a_list_of_messages(value: Any) -> None:
    c = ContextCompactor()
    calls = {
        "compact": lambda: c.compact(value),
        "plan": lambda: c.plan(value),
        "check": lambda: c.check(value),
        "check_with_state": lambda: c.check(value, state=ConversationState()),
        "validate_messages": lambda: validate_messages(value),
        "count_messages": lambda: c.counter.count_messages(value),
    }
    for name, call in calls.items():
        with pytest.raises(MessageTypeError) as e:
            call()
        assert (e.value.index, e.value.field) == (None, "messages"), name


@pytest.fixture
def session() -> Any:
    s = Session(compactor=ContextCompactor(), store=":memory:")
    s.append(U)
    yield s
    s.close()


def nested(depth: int) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "user", "content": "x", "metadata": {}}
    inner = m["metadata"]
    for _ in range(depth):
        inner["a"] = {}
        inner = inner["a"]
    return m


def cyclic() -> dict[str, Any]:
    m: dict[str, Any] = {"role": "user", "content": "x"}
    m["metadata"] = {"self": m}
    return m


@pytest.mark.parametrize(
    "message,index,field",
    [
        (nested(100_000), 0, "metadata"),
        (cyclic(), 0, "metadata"),
        (
            {"role": "user", "content": [{"type": "text", "text": "x", "extra": [[[[[[]]]]]] * 3}], "n": float("inf")},
            0,
            "n",
        ),
    ],
    ids=["deeply nested", "cycle", "infinity"],
)
def test_session_append_of_an_unstorable_message_is_a_typed_error(
    session: Session, message: dict[str, Any], index: int, field: str
) -> None:
    with pytest.raises(MessageTypeError) as e:
        session.append(message)
    assert (e.value.index, e.value.field) == (index, field)
    with pytest.raises(MessageTypeError) as e:
        session.extend([A, message])
    assert (e.value.index, e.value.field) == (1, field)
    assert session.history() == [U]


@pytest.mark.parametrize("value", ["abc", {"role": "user", "content": "x"}, 5, b"xyz"], ids=repr)
def test_session_extend_refuses_a_str_or_dict(session: Session, value: Any) -> None:
    with pytest.raises(MessageTypeError) as e:
        session.extend(value)
    assert (e.value.index, e.value.field) == (None, "messages") and "messages" in str(e.value)
    assert session.history() == [U]
    assert session.extend(m for m in [A]) != []  # any other iterable of messages is fine


@pytest.mark.parametrize(
    "message,rule",
    [
        ({"role": "wizard", "content": "x"}, "invalid_role"),
        ({"role": "user", "content": [{"type": "text"}]}, "malformed_block"),
        ({"role": "user", "content": [{"text": "no type"}]}, "malformed_block"),
    ],
    ids=["unknown role", "text without text", "block without type"],
)
def test_session_refuses_what_no_later_message_can_make_valid(session: Session, message: Any, rule: str) -> None:
    with pytest.raises(InvalidConversationError) as e:
        session.extend([A, message])
    assert [(p.index, p.rule) for p in e.value.problems] == [(1, rule)]
    assert "Nothing was stored" in str(e.value)
    assert session.history() == [U] and session.context() == [U]


def test_an_anthropic_session_refuses_a_system_message() -> None:
    s = Session(compactor=ContextCompactor(), store=":memory:", format="anthropic", system="be brief")
    with pytest.raises(InvalidConversationError) as e:
        s.append({"role": "system", "content": "x"})
    assert e.value.problems[0].rule == "invalid_role"
    s.close()


@pytest.mark.parametrize(
    "kwargs,error,field",
    [
        ({"tools": "abc"}, MessageTypeError, "tools"),
        ({"tools": {"name": "bash"}}, MessageTypeError, "tools"),
        ({"system": 5}, MessageTypeError, "system"),
        ({"system": [nested(100_000)]}, MessageTypeError, None),
        ({"compactor": "nope"}, MessageTypeError, "compactor"),
        ({"store": 5}, MessageTypeError, "store"),
        ({"session_id": 5}, MessageTypeError, "session_id"),
        ({"format": "bard"}, ConfigError, "format"),  # gemini is a Session format now
    ],
    ids=["tools str", "tools dict", "system int", "system deep", "compactor", "store", "session_id", "format"],
)
def test_session_arguments_of_the_wrong_shape_are_typed_errors(
    kwargs: dict[str, Any], error: type, field: str | None
) -> None:
    args: dict[str, Any] = {"compactor": ContextCompactor(), "store": ":memory:"}
    args.update(kwargs)
    with pytest.raises(error) as e:
        Session(**args)
    if field is not None:
        assert e.value.field == field
    else:
        assert e.value.field.startswith("system[0]")  # where the nesting got too deep
