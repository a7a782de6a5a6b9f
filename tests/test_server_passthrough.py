"""What the proxy never changes: streamed and gzip responses reach the client byte-identical to the
stub's, as they arrive; other routes pass through untouched; Responses requests that hold
server-side state are forwarded as they are; a compactor failure forwards a request that fits."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from _server import TOKEN, running
from _upstream import WINDOWS, Upstream

httpx2 = pytest.importorskip("httpx2")

HEADERS = {"X-Compactor-Token": TOKEN, "Authorization": "Bearer sk-test"}


def _long(model: str = "gpt-test", turns: int = 40) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix /srv/app/tax.py."}]
    for i in range(turns):
        messages += [
            {"role": "assistant", "content": f"step {i}"},
            {"role": "user", "content": f"output {i}: " + "data " * 400},
        ]
    return {"model": model, "messages": messages, "max_tokens": 500}


@pytest.fixture
def stack() -> Iterator[tuple[Upstream, Any]]:
    with Upstream() as up, running(upstream_openai=up.url, upstream_anthropic=up.url, models=WINDOWS) as proxy:
        yield up, proxy


def _raw(client: Any, path: str, body: bytes, headers: dict[str, str]) -> tuple[Any, bytes]:
    with client.stream("POST", path, content=body, headers=headers) as r:
        return r, b"".join(r.iter_raw())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
@pytest.mark.parametrize("compacted", [False, True])
def test_streamed_responses_reach_the_client_byte_identical(stack: Any, path: str, compacted: bool) -> None:
    up, proxy = stack
    model = "claude-test" if path == "/v1/messages" else "gpt-test"
    body = _long(model, 40 if compacted else 1)
    body["stream"] = True
    with httpx2.Client(base_url=proxy.url, trust_env=False) as client:
        r, raw = _raw(client, path, json.dumps(body).encode(), {**HEADERS, "content-type": "application/json"})
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
    assert raw == up.requests[-1].sent and raw.count(b"\n\n") >= 14
    assert r.headers["x-compactor"] == ("compacted: rule" if compacted else "passthrough")
    assert "transfer-encoding" not in r.headers or r.headers["transfer-encoding"] == "chunked"


def test_a_stream_is_forwarded_as_it_arrives(stack: Any) -> None:
    up, proxy = stack
    up.hold_after_first_chunk = True  # the stub waits after its first event until we read it
    body = {**_long(turns=1), "stream": True}
    with (
        httpx2.Client(base_url=proxy.url, trust_env=False, timeout=20) as client,
        client.stream("POST", "/v1/chat/completions", json=body, headers=HEADERS) as r,
    ):
        chunks = r.iter_raw()
        first = next(chunks)  # arrives while the stub still holds the rest
        assert first.startswith(b"data: ")
        up.release.set()
        rest = b"".join(chunks)
    assert first + rest == up.requests[-1].sent


@pytest.mark.parametrize("compacted", [False, True])
def test_gzip_responses_reach_the_client_byte_identical(stack: Any, compacted: bool) -> None:
    up, proxy = stack
    up.gzip = True
    body = json.dumps(_long(turns=40 if compacted else 1)).encode()
    headers = {**HEADERS, "accept-encoding": "gzip", "content-type": "application/json"}
    with httpx2.Client(base_url=proxy.url, trust_env=False) as client:
        r, raw = _raw(client, "/v1/chat/completions", body, headers)
    assert r.headers["content-encoding"] == "gzip" and raw == up.requests[-1].sent
    assert int(r.headers["content-length"]) == len(raw)
    assert json.loads(gzip.decompress(raw))["object"] == "chat.completion"


def test_other_routes_pass_through_untouched(stack: Any) -> None:
    up, proxy = stack
    with httpx2.Client(base_url=proxy.url, trust_env=False, headers=HEADERS) as client:
        models = client.get("/v1/models?limit=5")
        assert models.status_code == 200 and models.headers["x-compactor"] == "passthrough"
        assert models.headers.get_list("set-cookie") == ["__cf_bm=a; Path=/", "_cfuvid=b; Path=/"]
        assert up.requests[-1].path == "/v1/models?limit=5"
        assert "x-compactor-token" not in up.requests[-1].headers  # the proxy's own token stays here
        assert up.requests[-1].headers["authorization"] == "Bearer sk-test"
        for path in ("/v1/messages/count_tokens", "/v1/responses/compact"):
            raw = json.dumps(_long("claude-test", 40)).encode()  # over the window, and yet untouched
            r = client.post(path, content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 200 and up.requests[-1].raw == raw and up.requests[-1].path == path


def test_responses_with_server_side_state_are_forwarded_as_they_are(stack: Any) -> None:
    up, proxy = stack
    items = [{"role": "user", "content": "data " * 400} for _ in range(40)]
    with httpx2.Client(base_url=proxy.url, trust_env=False, headers=HEADERS) as client:
        for extra in (
            {"previous_response_id": "resp_1"},
            {"conversation": "conv_1"},
            {"input": [*items, {"type": "item_reference", "id": "msg_1"}]},
        ):
            raw = json.dumps({"model": "gpt-test", "input": items, **extra}).encode()
            r = client.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
            assert r.headers["x-compactor"] == "passthrough: server-side state"
            assert up.requests[-1].raw == raw


def test_a_compactor_failure_forwards_a_request_that_fits(stack: Any, caplog: pytest.LogCaptureFixture) -> None:
    up, proxy = stack
    app = proxy.server.config.app.app
    rewriter = app.state.forwarder.rewriter

    class Broken:
        config = None

        def check(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("boom")

    real = rewriter.compactors.get
    rewriter.compactors.get = lambda *a, **k: Broken()
    try:
        raw = json.dumps(_long(turns=2)).encode()
        with httpx2.Client(base_url=proxy.url, trust_env=False, headers=HEADERS) as client:
            r = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    finally:
        rewriter.compactors.get = real
    assert r.status_code == 200 and r.headers["x-compactor"].startswith("error: RuntimeError")
    assert up.requests[-1].raw == raw
    assert rewriter.counts["errors"] == 1
    assert any(rec.levelno == logging.WARNING and "compaction failed" in rec.getMessage() for rec in caplog.records)


def test_an_unknown_model_is_forwarded_and_says_so(stack: Any) -> None:
    up, proxy = stack
    raw = json.dumps(_long("some-new-model", 40)).encode()
    with httpx2.Client(base_url=proxy.url, trust_env=False, headers=HEADERS) as client:
        r = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert "unknown model" in r.headers["x-compactor"] and up.requests[-1].raw == raw
