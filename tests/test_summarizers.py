"""context_compactor.summarizers through the real openai / anthropic SDKs (and plain HTTP) against a
local stub server on 127.0.0.1, directly and through compact()/acompact() and the failure ladder."""

from __future__ import annotations

import asyncio
import inspect
import pickle
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _messages import conversation
from _stub_server import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    SUMMARY_TEXT,
    Reply,
    StubServer,
    anthropic_error,
    anthropic_ok,
    openai_error,
    openai_ok,
)
from context_compactor import CompactResult, ContextCompactor, SummarizerError, SummaryRequest, validate_messages
from context_compactor.summarizers import (
    AsyncSummarizer,
    HTTPStatusError,
    ResponseFormatError,
    Summarizer,
    anthropic_messages,
    async_openai_compatible,
    openai_chat,
    openai_compatible,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

SECRET = "sk-stub-SECRET-0123456789"
KINDS = ("openai", "anthropic", "compat")
MODES = ("sync", "async")
REQUEST = SummaryRequest(system_prompt="You summarise.", user_prompt="Transcript: ...", max_tokens=321)


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests go straight to 127.0.0.1, whatever the environment says."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def server() -> Iterator[StubServer]:
    stub = StubServer().start()
    try:
        yield stub
    finally:
        stub.stop()


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compactor(**kw: Any) -> ContextCompactor:
    return ContextCompactor(max_context_tokens=12_000, reserve_tokens=1_000, clear_at_least_tokens=0, **kw)


# -- building clients and summarizers -------------------------------------------------------------------


def path_of(kind: str) -> str:
    return ANTHROPIC_PATH if kind == "anthropic" else OPENAI_PATH


def error_reply(kind: str, status: int, message: str | None = None) -> Reply:
    return anthropic_error(status, message) if kind == "anthropic" else openai_error(status, message)


def make_client(kind: str, mode: str, base: str, *, max_retries: int = 0, timeout: float = 10.0) -> Any:
    if kind == "openai":
        cls = openai.AsyncOpenAI if mode == "async" else openai.OpenAI
        return cls(base_url=f"{base}/v1", api_key="test", max_retries=max_retries, timeout=timeout)
    if kind == "anthropic":
        cls = anthropic.AsyncAnthropic if mode == "async" else anthropic.Anthropic
        return cls(base_url=base, api_key="test", max_retries=max_retries, timeout=timeout)
    return None


def make_summarizer(kind: str, mode: str, client: Any, base: str, *, timeout: float = 10.0) -> Any:
    if kind == "openai":
        return openai_chat(client, "gpt-test")
    if kind == "anthropic":
        return anthropic_messages(client, "claude-test")
    factory = async_openai_compatible if mode == "async" else openai_compatible
    return factory(f"{base}/v1", "local-model", SECRET, timeout=timeout)


def run(
    kind: str,
    mode: str,
    base: str,
    action: Callable[[Any], Any],
    *,
    max_retries: int = 0,
    timeout: float = 10.0,
) -> Any:
    """Build the client and summarizer for ``kind``/``mode`` and run ``action(summarizer)`` (a plain
    call for sync, a coroutine function for async), closing the client afterwards."""
    if mode == "async":

        async def main() -> Any:
            client = make_client(kind, mode, base, max_retries=max_retries, timeout=timeout)
            try:
                return await action(make_summarizer(kind, mode, client, base, timeout=timeout))
            finally:
                if client is not None:
                    await client.close()

        return asyncio.run(main())
    client = make_client(kind, mode, base, max_retries=max_retries, timeout=timeout)
    try:
        return action(make_summarizer(kind, mode, client, base, timeout=timeout))
    finally:
        if client is not None:
            client.close()


def compact_with(kind: str, mode: str, base: str, *, max_retries: int = 0, timeout: float = 10.0, **kw: Any) -> Any:
    """``compact()`` (sync) or ``await acompact()`` (async) on :func:`conversation` with the summarizer."""
    if mode == "async":

        async def action(summarize: Any) -> CompactResult:
            return await compactor(summarizer=summarize, **kw).acompact(conversation())

        return run(kind, mode, base, action, max_retries=max_retries, timeout=timeout)
    return run(
        kind,
        mode,
        base,
        lambda s: compactor(summarizer=s, **kw).compact(conversation()),
        max_retries=max_retries,
        timeout=timeout,
    )


def call_once(kind: str, mode: str, base: str, request: SummaryRequest = REQUEST) -> Any:
    """One direct call of the summarizer."""
    if mode == "async":

        async def action(summarize: Any) -> Any:
            assert isinstance(summarize, AsyncSummarizer)
            return await summarize(request)

        return run(kind, mode, base, action)

    def sync_action(summarize: Any) -> Any:
        assert isinstance(summarize, Summarizer)
        return summarize(request)

    return run(kind, mode, base, sync_action)


# -- the request each summarizer sends, and the SummaryResponse -----------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_openai_chat_request_and_reply(server: StubServer, mode: str) -> None:
    server.enqueue(
        OPENAI_PATH, openai_ok("<summary>short</summary>"), openai_ok("<summary>cut", finish_reason="length")
    )
    r = call_once("openai", mode, server.url())
    assert r.text == "<summary>short</summary>" and r.truncated is False
    assert r.usage.prompt_tokens == 1234 and r.usage.completion_tokens == 56
    r2 = call_once("openai", mode, server.url())
    assert r2.text == "<summary>cut" and r2.truncated is True
    body = server.bodies(OPENAI_PATH)[0]
    assert body["model"] == "gpt-test"
    assert body["messages"] == REQUEST.messages
    assert body["max_completion_tokens"] == 321
    assert "max_tokens" not in body
    assert not {"tools", "tool_choice", "functions", "stream"} & body.keys()
    assert server.requests[0].headers["authorization"] == "Bearer test"


@pytest.mark.parametrize("mode", MODES)
def test_anthropic_messages_request_and_reply(server: StubServer, mode: str) -> None:
    blocks = [
        {"type": "thinking", "thinking": "Let me think about it.", "signature": "sig"},
        {"type": "text", "text": "<summary>part one, "},
        {"type": "text", "text": "part two</summary>"},
    ]
    server.enqueue(ANTHROPIC_PATH, anthropic_ok(blocks=blocks), anthropic_ok("<summary>cut", stop_reason="max_tokens"))
    r = call_once("anthropic", mode, server.url())
    assert r.text == "<summary>part one, part two</summary>" and r.truncated is False
    assert r.usage.input_tokens == 1234 and r.usage.output_tokens == 56
    r2 = call_once("anthropic", mode, server.url())
    assert r2.text == "<summary>cut" and r2.truncated is True
    body = server.bodies(ANTHROPIC_PATH)[0]
    assert body["model"] == "claude-test"
    assert body["system"] == REQUEST.system_prompt
    assert body["messages"] == [{"role": "user", "content": REQUEST.user_prompt}]
    assert body["max_tokens"] == 321
    assert not {"tools", "tool_choice", "stream", "max_completion_tokens"} & body.keys()
    headers = server.requests[0].headers
    assert headers.get("x-api-key") == "test" or headers.get("authorization") == "Bearer test"


@pytest.mark.parametrize("mode", MODES)
def test_openai_compatible_request_and_reply(server: StubServer, mode: str) -> None:
    server.enqueue(
        OPENAI_PATH,
        openai_ok("<think>\nhmm, what matters?\n</think>\n\n<summary>local</summary>"),
        openai_ok("<summary>cut", finish_reason="length"),
    )
    r = call_once("compat", mode, server.url())
    # The reply comes back as sent; its leading <think> block is dropped by the core, which reads
    # every summarizer's reply the same way (`summary/reply.rs`).
    assert r.text == "<think>\nhmm, what matters?\n</think>\n\n<summary>local</summary>"
    summary = ContextCompactor(max_context_tokens=4000).plan(conversation(12), force=True).apply(r).summary
    assert summary is not None and "local" in summary and "hmm" not in summary
    assert r.truncated is False and r.usage["prompt_tokens"] == 1234
    r2 = call_once("compat", mode, server.url())
    assert r2.text == "<summary>cut" and r2.truncated is True
    body = server.bodies(OPENAI_PATH)[0]
    assert body == {"model": "local-model", "messages": REQUEST.messages, "max_tokens": 321, "stream": False}
    headers = server.requests[0].headers
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("context-compactor/")


def test_openai_compatible_without_key_sends_no_authorization(server: StubServer) -> None:
    summarize = openai_compatible(server.url("/v1/"), "m", temperature=0.2, headers={"X-Trace": "1"})
    assert summarize(REQUEST).text == SUMMARY_TEXT
    received = server.requests[0]
    assert received.path == "/v1/chat/completions", "a trailing slash in base_url is fine"
    assert "authorization" not in received.headers
    assert received.headers["x-trace"] == "1"
    assert received.body["temperature"] == 0.2


def test_params_override_the_token_limit_and_reserved_ones_are_refused(server: StubServer) -> None:
    with openai.OpenAI(base_url=server.url("/v1"), api_key="test", max_retries=0) as client:
        openai_chat(client, "o-test", max_completion_tokens=8000, reasoning_effort="low")(REQUEST)
        openai_chat(client, "legacy", max_tokens=100)(REQUEST)
        with pytest.raises(TypeError, match="tools"):
            openai_chat(client, "gpt-test", tools=[])
        with pytest.raises(TypeError, match="messages"):
            openai_chat(client, "gpt-test", messages=[])
    with anthropic.Anthropic(base_url=server.url(), api_key="test", max_retries=0) as aclient:
        anthropic_messages(aclient, "claude-test", max_tokens=4000, metadata={"user_id": "u1"})(REQUEST)
        with pytest.raises(TypeError, match="system"):
            anthropic_messages(aclient, "claude-test", system="x")
    openai_compatible(server.url("/v1"), "m", max_tokens=50)(REQUEST)
    with pytest.raises(TypeError, match="stream"):
        openai_compatible(server.url("/v1"), "m", stream=True)
    b1, b2, b3 = server.bodies(OPENAI_PATH)
    assert b1["max_completion_tokens"] == 8000 and b1["reasoning_effort"] == "low"
    assert b2["max_tokens"] == 100 and "max_completion_tokens" not in b2
    assert b3["max_tokens"] == 50
    (a1,) = server.bodies(ANTHROPIC_PATH)
    assert a1["max_tokens"] == 4000 and a1["metadata"] == {"user_id": "u1"}


def test_params_the_sdk_does_not_take_are_refused_at_once() -> None:
    """Else every compaction would fall back on the SDK's TypeError (an "unknown" error)."""
    with pytest.raises(TypeError, match="not_a_param"):
        openai_chat(openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), "m", not_a_param=1)
    with pytest.raises(TypeError, match="not_a_param"):
        anthropic_messages(anthropic.AsyncAnthropic(api_key="k"), "m", not_a_param=1)

    class Loose:
        class chat:  # mimics client.chat.completions.create(**kwargs)
            class completions:
                @staticmethod
                def create(**kwargs: Any) -> Any:
                    return {"choices": [{"message": {"content": "<summary>ok</summary>"}, "finish_reason": "stop"}]}

    assert openai_chat(Loose(), "m", anything=1)(REQUEST).text == "<summary>ok</summary>", "dict replies work too"


def test_not_a_client_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"chat\.completions\.create"):
        openai_chat(object(), "gpt-test")
    with pytest.raises(TypeError, match=r"messages\.create"):
        anthropic_messages("not a client", "claude-test")


def test_sync_or_async_after_the_client() -> None:
    for sync_client, async_client, factory in (
        (openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), openai.AsyncOpenAI(api_key="k"), openai_chat),
        (anthropic.Anthropic(api_key="k"), anthropic.AsyncAnthropic(api_key="k"), anthropic_messages),
    ):
        s = factory(sync_client, "m")
        a = factory(async_client, "m")
        assert isinstance(s, Summarizer) and not inspect.iscoroutinefunction(s.__call__)
        assert isinstance(a, AsyncSummarizer) and inspect.iscoroutinefunction(a.__call__)
    assert isinstance(openai_compatible("http://127.0.0.1:9/v1", "m"), Summarizer)
    assert isinstance(async_openai_compatible("http://127.0.0.1:9/v1", "m"), AsyncSummarizer)


def test_names_and_reprs_are_readable_and_secret_free() -> None:
    c = openai.OpenAI(api_key=SECRET, base_url="http://127.0.0.1:9/v1")
    a = anthropic.AsyncAnthropic(api_key=SECRET)
    cases = [
        (openai_chat(c, "gpt-4o-mini", temperature=0, extra_headers={"X-Key": SECRET}), "openai_chat"),
        (anthropic_messages(a, "claude-haiku-4-5"), "anthropic_messages"),
        (openai_compatible("http://127.0.0.1:9/v1?key=" + SECRET, "qwen", SECRET), "openai_compatible"),
        (async_openai_compatible("http://127.0.0.1:9/v1", "qwen", SECRET), "async_openai_compatible"),
    ]
    for summarize, name in cases:
        assert summarize.__name__ == name
        assert repr(summarize).startswith(f"{name}(model=")
        assert SECRET not in repr(summarize) and SECRET not in str(vars(summarize).get("_details"))
    assert (
        repr(cases[0][0]) == "openai_chat(model='gpt-4o-mini', client=OpenAI, params=['extra_headers', 'temperature'])"
    )
    assert repr(cases[2][0]) == "openai_compatible(model='qwen', base_url='http://127.0.0.1:9/v1', api_key='***')"


# -- openai_compatible: its own error mapping -----------------------------------------------------------


def test_openai_compatible_http_errors(server: StubServer) -> None:
    summarize = openai_compatible(server.url("/v1"), "m", SECRET, timeout=5)
    server.enqueue(
        OPENAI_PATH,
        openai_error(401, f"Incorrect API key provided: {SECRET}."),
        Reply(404, {"error": 'model "m" not found, try pulling it first'}),  # Ollama
        Reply(400, {"object": "error", "message": "max_tokens is too large", "type": "BadRequestError", "code": 400}),
        openai_error(429),
        Reply(502, b"<html>Bad Gateway</html>", {"Content-Type": "text/html"}),
    )
    errors: list[HTTPStatusError] = []
    for _ in range(5):
        with pytest.raises(HTTPStatusError) as e:
            summarize(REQUEST)
        errors.append(e.value)
    e401, e404, e400, e429, e502 = errors
    assert [e.status_code for e in errors] == [401, 404, 400, 429, 502]
    assert e401.message == "Incorrect API key provided: ***."
    for e in errors:
        assert SECRET not in str(e) and SECRET not in e.body and SECRET not in repr(e)
        assert e.url == f"{server.url()}/v1/chat/completions"
        assert e.__cause__ is None and e.__suppress_context__
    assert e404.message == 'model "m" not found, try pulling it first'
    assert e400.message == "max_tokens is too large"
    assert e429.retry_after == 0.0 and e401.retry_after is None
    assert "Bad Gateway" in e502.message
    copy = pickle.loads(pickle.dumps(e429))
    assert (copy.status_code, copy.message, copy.retry_after, str(copy)) == (429, e429.message, 0.0, str(e429))


def test_openai_compatible_bad_replies(server: StubServer) -> None:
    summarize = openai_compatible(server.url("/v1"), "m")
    server.enqueue(
        OPENAI_PATH,
        Reply(200, b"not json"),
        Reply(200, {"error": {"message": "model is loading"}}),
        Reply(200, {"choices": []}),
        Reply(307, {}, {"Location": "http://127.0.0.2:1/elsewhere"}),
    )
    with pytest.raises(ResponseFormatError, match="not JSON"):
        summarize(REQUEST)
    with pytest.raises(ResponseFormatError, match="model is loading"):
        summarize(REQUEST)
    with pytest.raises(ResponseFormatError, match="no choices"):
        summarize(REQUEST)
    with pytest.raises(HTTPStatusError) as e:
        summarize(REQUEST)
    assert e.value.status_code == 307, "redirects are not followed (the key would go along)"
    assert len(server.requests) == 4


def test_openai_compatible_network_errors(server: StubServer) -> None:
    with pytest.raises(ConnectionError, match="cannot reach"):
        openai_compatible(f"http://127.0.0.1:{closed_port()}/v1", "m", SECRET)(REQUEST)
    server.enqueue(OPENAI_PATH, Reply(delay=10))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as e:
        openai_compatible(server.url("/v1"), "m", SECRET, timeout=0.3)(REQUEST)
    assert time.monotonic() - t0 < 3
    assert SECRET not in str(e.value)


def test_openai_compatible_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="http"):
        openai_compatible("127.0.0.1:8000/v1", "m")
    with pytest.raises(ValueError, match="api_key") as e:
        openai_compatible(f"http://user:{SECRET}@127.0.0.1:8000/v1", "m")
    assert SECRET not in str(e.value)
    with pytest.raises(ValueError, match="timeout"):
        openai_compatible("http://127.0.0.1:8000/v1", "m", timeout=0)


def test_async_openai_compatible_cancellation_returns_at_once(server: StubServer) -> None:
    server.enqueue(OPENAI_PATH, Reply(delay=10))
    summarize = async_openai_compatible(server.url("/v1"), "m", timeout=5)

    async def main() -> float:
        task = asyncio.ensure_future(summarize(REQUEST))
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    t0 = time.monotonic()
    assert asyncio.run(main()) < 0.5
    assert time.monotonic() - t0 < 2, "asyncio.run does not wait for the abandoned request"


# -- through compact()/acompact(): success ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_compaction_uses_the_summary(server: StubServer, kind: str, mode: str) -> None:
    r = compact_with(kind, mode, server.url())
    assert r.strategy == "summary" and r.fallback_reason is None
    assert "failing test" in (r.summary or "")
    assert validate_messages(r.messages) == []
    # The summarizer reads the tool output itself (not this compaction's placeholders): at this
    # window that is several chunks, each updating the summary of the ones before.
    bodies = server.bodies(path_of(kind))
    assert len(bodies) == 3
    body = bodies[0]
    if kind == "anthropic":
        # The summary growth bound: a quarter of the target (summary_token_limit).
        assert body["max_tokens"] == compactor().config.summary_token_limit == 550 and "tools" not in body
        assert isinstance(body["system"], str) and body["system"]
        assert len(body["messages"]) == 1 and "f5.py" in body["messages"][0]["content"]
    else:
        limit = "max_completion_tokens" if kind == "openai" else "max_tokens"
        assert body[limit] == compactor().config.summary_token_limit and "tools" not in body
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert "f5.py" in body["messages"][1]["content"]


@pytest.mark.parametrize("kind", KINDS)
def test_sync_client_under_acompact(server: StubServer, kind: str) -> None:
    def action(summarize: Any) -> CompactResult:
        assert isinstance(summarize, Summarizer)
        return asyncio.run(compactor(summarizer=summarize).acompact(conversation()))

    r = run(kind, "sync", server.url(), action)
    assert r.strategy == "summary" and r.fallback_reason is None


@pytest.mark.parametrize("kind", KINDS)
def test_async_summarizer_under_compact_points_to_acompact(server: StubServer, kind: str) -> None:
    async def action(summarize: Any) -> None:
        with pytest.raises(SummarizerError, match="acompact"):
            compactor(summarizer=summarize).compact(conversation())

    run(kind, "async", server.url(), action)
    assert server.requests == [], "the coroutine was closed, never run"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_sdk_retries_a_429_with_retry_after_ms_0(server: StubServer, kind: str) -> None:
    server.enqueue(path_of(kind), error_reply(kind, 429))
    t0 = time.monotonic()
    r = compact_with(kind, "sync", server.url(), max_retries=2)
    assert r.strategy == "summary" and r.fallback_reason is None
    assert len(server.requests) == 4  # the 429, then the three chunks
    assert time.monotonic() - t0 < 5


# -- through compact()/acompact(): the failure ladder -----------------------------------------------------

TRANSIENT_CLASS = {
    ("openai", 429): "RateLimitError",
    ("openai", 503): "InternalServerError",
    ("openai", 529): "InternalServerError",
    ("anthropic", 429): "RateLimitError",
    ("anthropic", 503): "ServiceUnavailableError",
    ("anthropic", 529): "OverloadedError",
    ("compat", 429): "HTTPStatusError",
    ("compat", 503): "HTTPStatusError",
    ("compat", 529): "HTTPStatusError",
}
PERMANENT_CLASS = {
    ("openai", 401): "AuthenticationError",
    ("openai", 404): "NotFoundError",
    ("openai", 400): "BadRequestError",
    ("anthropic", 401): "AuthenticationError",
    ("anthropic", 404): "NotFoundError",
    ("anthropic", 400): "BadRequestError",
    ("compat", 401): "HTTPStatusError",
    ("compat", 404): "HTTPStatusError",
    ("compat", 400): "HTTPStatusError",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("kind", "status"), list(TRANSIENT_CLASS))
def test_transient_http_errors_fall_back(server: StubServer, kind: str, status: int, mode: str) -> None:
    server.enqueue(path_of(kind), error_reply(kind, status))
    r = compact_with(kind, mode, server.url())
    assert r.strategy == "rule_summary"
    assert r.fallback_reason and r.fallback_reason.startswith(TRANSIENT_CLASS[kind, status] + ":")
    assert str(status) in r.fallback_reason
    assert SECRET not in r.fallback_reason
    assert validate_messages(r.messages) == []
    assert len(server.requests) == 1, "max_retries=0: one request"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("kind", "status"), list(PERMANENT_CLASS))
def test_permanent_http_errors_raise(server: StubServer, kind: str, status: int, mode: str) -> None:
    echo = f"Incorrect API key provided: {SECRET}" if status == 401 else None
    server.enqueue(path_of(kind), error_reply(kind, status, echo))
    with pytest.raises(SummarizerError) as e:
        compact_with(kind, mode, server.url())
    cause = e.value.__cause__
    assert type(cause).__name__ == PERMANENT_CLASS[kind, status]
    assert cause.status_code == status  # type: ignore[union-attr]
    assert "permanent" in str(e.value)
    if kind == "openai":
        assert isinstance(cause, openai.APIStatusError)
    elif kind == "anthropic":
        assert isinstance(cause, anthropic.APIStatusError)
    else:
        assert isinstance(cause, HTTPStatusError) and SECRET not in str(e.value)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("kind", "status"), list(PERMANENT_CLASS))
def test_fallback_all_falls_back_on_permanent_errors(server: StubServer, kind: str, status: int, mode: str) -> None:
    server.enqueue(path_of(kind), error_reply(kind, status))
    r = compact_with(kind, mode, server.url(), on_summarizer_error="fallback_all")
    assert r.strategy == "rule_summary"
    assert r.fallback_reason and r.fallback_reason.startswith(PERMANENT_CLASS[kind, status] + ":")


@pytest.mark.parametrize("kind", KINDS)
def test_raise_mode_raises_on_transient_errors(server: StubServer, kind: str) -> None:
    server.enqueue(path_of(kind), error_reply(kind, 429))
    with pytest.raises(SummarizerError) as e:
        compact_with(kind, "sync", server.url(), on_summarizer_error="raise")
    assert type(e.value.__cause__).__name__ == TRANSIENT_CLASS[kind, 429]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_slow_reply_past_summarizer_timeout_finishes_promptly(server: StubServer, kind: str, mode: str) -> None:
    server.enqueue(path_of(kind), Reply(delay=10))
    t0 = time.monotonic()
    r = compact_with(kind, mode, server.url(), summarizer_timeout_s=0.3)
    assert time.monotonic() - t0 < 3
    assert r.strategy == "rule_summary"
    assert r.fallback_reason and r.fallback_reason.startswith("SummarizerTimeout:")


@pytest.mark.parametrize(
    ("kind", "mode"),
    [
        ("openai", "sync"),
        ("openai", "async"),
        ("anthropic", "sync"),
        ("anthropic", "async"),
        ("compat", "sync"),
        ("compat", "async"),
    ],
)
def test_client_timeout_falls_back(server: StubServer, kind: str, mode: str) -> None:
    server.enqueue(path_of(kind), Reply(delay=10))
    t0 = time.monotonic()
    r = compact_with(kind, mode, server.url(), timeout=0.3)
    assert time.monotonic() - t0 < 3
    assert r.strategy == "rule_summary"
    expected = "TimeoutError:" if kind == "compat" else "APITimeoutError:"
    assert r.fallback_reason and r.fallback_reason.startswith(expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_connection_refused_falls_back(kind: str, mode: str) -> None:
    r = compact_with(kind, mode, f"http://127.0.0.1:{closed_port()}")
    assert r.strategy == "rule_summary"
    expected = "ConnectionError:" if kind == "compat" else "APIConnectionError:"
    assert r.fallback_reason and r.fallback_reason.startswith(expected)
    assert SECRET not in r.fallback_reason
