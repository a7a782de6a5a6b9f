"""The compacting proxy through the real ``openai`` and ``anthropic`` SDKs (``base_url`` at the
proxy, the token in ``default_headers``) against an upstream stub on 127.0.0.1: an agent loop of
200+ calls, streaming and not; every request the stub receives is valid and within its window;
pass-through bodies are byte-identical; the compacted prefix is byte-identical from request to
request until the next compaction; conversations never see each other's prefix."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from _server import TOKEN, running
from _upstream import WINDOWS, Upstream

httpx2 = pytest.importorskip("httpx2")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

KEY = "sk-test-PROVIDER-KEY-never-logged-1234567890"
SYSTEM = "You are a coding agent. Work in /srv/app."
TASK = "Fix the failing test in /srv/app/billing/tax.py; never push to main."
TOOLS_OPENAI = [
    {"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}
]
TOOLS_ANTHROPIC = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
TOOLS_RESPONSES = [{"type": "function", "name": "bash", "description": "run", "parameters": {"type": "object"}}]


def output(i: int, marker: str) -> str:
    return f"{marker} output of step {i}:\n" + "".join(f"{marker} line {i}.{j}: value = {i * j}\n" for j in range(60))


@dataclass
class Traffic:
    """What the SDK sent (request bodies) and the X-Compactor header of each response."""

    sent: list[bytes] = field(default_factory=list)
    status: list[str] = field(default_factory=list)

    def client(self) -> Any:
        def on_request(request: Any) -> None:
            if request.method == "POST":
                self.sent.append(bytes(request.content))

        def on_response(response: Any) -> None:
            if response.request.method == "POST":
                self.status.append(response.headers.get("x-compactor", ""))

        client = httpx2.Client(event_hooks={"request": [on_request], "response": [on_response]}, trust_env=False)
        _OPEN.append(client)
        return client


#: The HTTP clients a test opened (closed after it).
_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Upstream, Any]]:
    store = str(tmp_path_factory.mktemp("store") / "sessions.db")
    with (
        Upstream() as up,
        running(upstream_openai=up.url, upstream_anthropic=up.url, models=WINDOWS, store=store) as proxy,
    ):
        yield up, proxy


def _openai(proxy: Any, traffic: Traffic, key: str = KEY) -> Any:
    return openai.OpenAI(
        base_url=proxy.url + "/v1",
        api_key=key,
        default_headers={"X-Compactor-Token": TOKEN},
        http_client=traffic.client(),
        max_retries=0,
    )


def _anthropic(proxy: Any, traffic: Traffic) -> Any:
    return anthropic.Anthropic(
        base_url=proxy.url,
        api_key=KEY,
        default_headers={"X-Compactor-Token": TOKEN},
        http_client=traffic.client(),
        max_retries=0,
    )


def openai_loop(client: Any, calls: int, marker: str, pause: float = 0.0) -> None:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for i in range(calls):
        time.sleep(pause)
        if i % 5 == 4:
            stream = client.chat.completions.create(
                model="gpt-test", messages=messages, tools=TOOLS_OPENAI, max_completion_tokens=1000, stream=True
            )
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert text.startswith("word0 word1")
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": output(i, marker)}]
            continue
        r = client.chat.completions.create(
            model="gpt-test", messages=messages, tools=TOOLS_OPENAI, max_completion_tokens=1000
        )
        msg = r.choices[0].message
        messages.append(msg)  # the SDK's own object, as the canonical loop does
        messages.append({"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": output(i, marker)})


def anthropic_loop(client: Any, calls: int, marker: str) -> None:
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for i in range(calls):
        if i % 5 == 4:
            stream = client.messages.create(
                model="claude-test",
                max_tokens=1000,
                system=SYSTEM,
                messages=messages,
                tools=TOOLS_ANTHROPIC,
                stream=True,
            )
            text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
            assert text.startswith("word0 word1")
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": output(i, marker)}]
            continue
        r = client.messages.create(
            model="claude-test", max_tokens=1000, system=SYSTEM, messages=messages, tools=TOOLS_ANTHROPIC
        )
        messages.append({"role": "assistant", "content": r.content})
        use = next(b for b in r.content if b.type == "tool_use")
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": output(i, marker)}]}
        )


def responses_loop(client: Any, calls: int, marker: str) -> None:
    items: list[Any] = [{"role": "user", "content": TASK}]
    for i in range(calls):
        r = client.responses.create(
            model="gpt-test", instructions=SYSTEM, input=items, tools=TOOLS_RESPONSES, max_output_tokens=1000
        )
        call = r.output[0]
        items.append({"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments})
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": output(i, marker)})


def _messages_bytes(raw: bytes, key: bytes) -> bytes:
    """The bytes of the ``messages``/``input`` array inside a raw JSON body."""
    start = raw.index(b'"' + key + b'":') + len(key) + 3
    _, end = json.JSONDecoder().raw_decode(raw.decode(), start)
    return raw[start:end]


def _check_traffic(up: Upstream, first: int, traffic: Traffic, key: bytes) -> dict[str, int]:
    """Pass-through byte identity and prefix stability over one loop's requests."""
    got = up.requests[first : first + len(traffic.sent)]
    assert len(got) == len(traffic.sent) == len(traffic.status)
    figures = {"calls": len(got), "passthrough_identical": 0, "compacted": 0, "reused_prefix_identical": 0}
    previous: bytes | None = None
    for seen, sent, status in zip(got, traffic.sent, traffic.status, strict=True):
        if status == "passthrough":
            assert seen.raw == sent, "a pass-through body was changed"
            figures["passthrough_identical"] += 1
            previous = None
            continue
        assert status.startswith("compacted: rule"), status
        figures["compacted"] += 1
        current = _messages_bytes(seen.raw, key)
        if status.endswith("prefix reused"):
            assert previous is not None and current.startswith(previous[:-1]), "the compacted prefix changed"
            figures["reused_prefix_identical"] += 1
        previous = current
    return figures


def test_sdk_agent_loops_of_200_plus_calls(stack: tuple[Upstream, Any], caplog: pytest.LogCaptureFixture) -> None:
    up, proxy = stack
    for name in ("context_compactor", "uvicorn", "uvicorn.error", "httpx2", "fastapi"):
        caplog.set_level(logging.DEBUG, logger=name)
    totals: dict[str, int] = {}
    for loop, make, calls, key in (
        (openai_loop, _openai, 110, b"messages"),
        (anthropic_loop, _anthropic, 80, b"messages"),
        (responses_loop, _openai, 20, b"input"),
    ):
        traffic = Traffic()
        first = len(up.requests)
        loop(make(proxy, traffic), calls, "ALPHA")
        figures = _check_traffic(up, first, traffic, key)
        assert figures["compacted"] >= 3 and figures["passthrough_identical"] >= 5, figures
        for k, v in figures.items():
            totals[k] = totals.get(k, 0) + v
    assert up.problems == []  # every request valid and within its window
    assert totals["calls"] >= 200 and totals["reused_prefix_identical"] >= 50, totals
    print("agent loops:", totals)
    # The provider key never reaches a log record or the store.
    assert KEY not in caplog.text and all(KEY not in str(r.args) for r in caplog.records)
    store = Path(proxy.settings.store)
    assert store.exists() and all(KEY.encode() not in p.read_bytes() for p in store.parent.iterdir())


def test_two_conversations_never_get_each_others_prefix(stack: tuple[Upstream, Any]) -> None:
    up, proxy = stack
    first = len(up.requests)
    a, b = _openai(proxy, Traffic()), _openai(proxy, Traffic())
    # Interleaved: same system prompt and task, different tool output.
    for _ in range(4):
        openai_loop(a, 8, "ALPHA")
        openai_loop(b, 8, "BETA")
    for seen in up.requests[first:]:
        assert not (b"ALPHA" in seen.raw and b"BETA" in seen.raw)


def test_the_prefix_memory_is_scoped_by_the_credential(stack: tuple[Upstream, Any]) -> None:
    _, proxy = stack
    same, other, again = Traffic(), Traffic(), Traffic()
    openai_loop(_openai(proxy, same), 20, "GAMMA")
    openai_loop(_openai(proxy, again), 20, "GAMMA")  # the same conversation, the same key
    openai_loop(_openai(proxy, other, key="sk-other-client"), 20, "GAMMA")  # another client
    first_over = next(i for i, s in enumerate(same.status) if s != "passthrough")
    assert again.status[first_over].endswith("prefix reused")
    assert other.status[first_over] == "compacted: rule"


def test_a_request_that_cannot_fit_gets_the_providers_error(stack: tuple[Upstream, Any]) -> None:
    _, proxy = stack
    huge = "x " * 40_000  # a system prompt over the window: never rewritten, so it cannot fit
    with pytest.raises(openai.BadRequestError) as e:
        _openai(proxy, Traffic()).chat.completions.create(
            model="gpt-test", messages=[{"role": "system", "content": huge}, {"role": "user", "content": "hi"}]
        )
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(anthropic.BadRequestError) as e2:
        _anthropic(proxy, Traffic()).messages.create(
            model="claude-test", max_tokens=100, system=huge, messages=[{"role": "user", "content": "hi"}]
        )
    assert "prompt is too long" in str(e2.value) and e2.value.body["error"]["type"] == "invalid_request_error"


def test_anthropic_cache_control_breakpoints(stack: tuple[Upstream, Any]) -> None:
    """System and tools (with their breakpoints) are never rewritten; breakpoints inside the
    replaced span go with it; one is added at the end of the summary; never more than 4."""
    up, proxy = stack
    ephemeral = {"type": "ephemeral"}
    system = [{"type": "text", "text": SYSTEM, "cache_control": ephemeral}]
    tools = [{**TOOLS_ANTHROPIC[0], "cache_control": ephemeral}]
    traffic = Traffic()
    client = _anthropic(proxy, traffic)
    first = len(up.requests)
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": TASK}]},
        {"role": "assistant", "content": [{"type": "text", "text": "On it.", "cache_control": ephemeral}]},
        {"role": "user", "content": "Start with the tests."},
    ]
    for i in range(30):
        # The client's own breakpoint on its last message, moved on each call (as Claude Code does).
        last = {
            **messages[-1],
            "content": [{"type": "text", "text": str(messages[-1]["content"]), "cache_control": ephemeral}],
        }
        if isinstance(messages[-1]["content"], list):
            last = {
                **messages[-1],
                "content": [*messages[-1]["content"][:-1], {**messages[-1]["content"][-1], "cache_control": ephemeral}],
            }
        r = client.messages.create(
            model="claude-test", max_tokens=1000, system=system, tools=tools, messages=[*messages[:-1], last]
        )
        use = next(b for b in r.content if b.type == "tool_use")
        messages.append({"role": "assistant", "content": r.content})
        # A short result and a long text the user adds: micro-compaction cannot clear text, so summaries run.
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "ok"}
        messages.append({"role": "user", "content": [result, {"type": "text", "text": output(i, "DELTA")}]})
    compacted = 0
    for seen, status in zip(up.requests[first:], traffic.status, strict=True):
        body = json.loads(seen.raw)
        assert body["system"] == system and body["tools"] == tools
        total = 2 + sum(json.dumps(m).count('"cache_control"') for m in body["messages"])
        assert total <= 4, total
        if status != "passthrough" and messages[1] not in body["messages"]:  # replaced, with its breakpoint
            compacted += 1
            # Ours: on a user message that is neither the task nor the client's last one (the summary).
            marked = [i for i, m in enumerate(body["messages"]) if '"cache_control"' in json.dumps(m)]
            assert any(0 < i < len(body["messages"]) - 1 and body["messages"][i]["role"] == "user" for i in marked)
    assert compacted >= 5
