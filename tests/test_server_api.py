"""The JSON API as an HTTP client sees it: /v1/count, /v1/check, /v1/compact (seed 003's
``summary_of``), the sessions, the committed OpenAPI schema, and the security defaults."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from _messages import conversation
from _server import TOKEN, client, running
from conftest import REPO
from context_compactor import validate_messages

OPENAPI = REPO / "docs" / "openapi.json"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with running() as s:
        yield s


@pytest.fixture
def http(server: Any) -> Iterator[Any]:
    with client(server) as c:
        yield c


def test_compact_returns_summary_of_in_the_hosts_ids(http: Any) -> None:
    messages = conversation(30)
    ids = [f"msg-{i}" for i in range(len(messages))]
    r = http.post("/v1/compact", json={"messages": messages, "ids": ids, "config": {"max_context_tokens": 12_000}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["compacted"] and out["strategy"] in ("summary", "rule_summary")
    assert out["summary"] and out["tokens_after"] < out["tokens_before"] <= 40_000
    # summary_of: the host's ids of what the summary replaced, in order; the task and the tail are kept.
    assert out["summary_of"] and all(i in ids for i in out["summary_of"])
    assert out["summary_of"] == sorted(out["summary_of"], key=ids.index)
    assert "msg-0" not in out["summary_of"] and "msg-1" not in out["summary_of"]
    # ids: per output message, the host id of a kept original (unchanged), null for new ones.
    assert len(out["ids"]) == len(out["messages"])
    for mid, m in zip(out["ids"], out["messages"], strict=True):
        if mid is not None:
            assert m == messages[ids.index(mid)]
    assert None in out["ids"]  # the summary
    assert validate_messages(out["messages"], format="openai") == []
    assert out["format"] == "openai" and out["over_budget"] is False


def test_count_and_check(http: Any) -> None:
    messages = conversation(30)
    count = http.post("/v1/count", json={"messages": messages}).json()
    assert count["format"] == "openai" and count["message_count"] == len(messages) and count["tokens"] > 12_000
    check = http.post("/v1/check", json={"messages": messages, "config": {"max_context_tokens": 12_000}}).json()
    assert check["urgency"] == "hard" and check["should_compact"] and check["usage_ratio"] > 1
    small = http.post("/v1/check", json={"messages": messages[:3]}).json()
    assert small["urgency"] == "none" and 0 < small["usage_ratio"] < 0.1


def test_bad_requests_name_what_is_wrong(http: Any) -> None:
    r = http.post("/v1/compact", json={"messages": conversation(2), "config": {"trigger_ratio": 7}})
    assert r.status_code == 400 and r.json()["error"]["field"] == "trigger_ratio"
    r = http.post("/v1/compact", json={"messages": conversation(2), "ids": [1, 2]})
    assert r.status_code == 400 and "parallel" in r.json()["error"]["message"]
    r = http.post("/v1/compact", json={"messages": [{"role": 5, "content": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_messages"
    # A request may not choose where the server writes files.
    r = http.post("/v1/compact", json={"messages": conversation(2), "config": {"offload_dir": "/tmp/x"}})
    assert r.status_code == 400 and "operator" in r.json()["error"]["message"]


def test_a_summarizer_url_in_a_request_is_refused(http: Any) -> None:
    body = {"messages": conversation(30), "force": True}
    r = http.post("/v1/compact", json={**body, "summarizer": "http://169.254.169.254/latest"})
    assert r.status_code == 400 and "never a URL" in r.json()["error"]["message"]
    r = http.post("/v1/compact", json={**body, "summarizer": "not-allow-listed"})
    assert r.status_code == 400 and "allow-listed" in r.json()["error"]["message"]
    r = http.post("/v1/compact", json={**body, "summarizer_url": "http://127.0.0.1:1/v1"})
    assert r.status_code == 422  # no such field


def test_no_token_is_401_and_the_page_shell_is_open(server: Any) -> None:
    with client(server, token=None) as anon:
        assert anon.post("/v1/count", json={"messages": []}).status_code == 401
        assert anon.get("/v1/sessions").status_code == 401
        assert anon.get("/openapi.json").status_code == 401
        assert anon.post("/v1/chat/completions", json={}).status_code == 401
        assert anon.get("/").status_code == 200  # the shell holds no data
    with client(server, token="wrong") as wrong:
        assert wrong.post("/v1/count", json={"messages": []}).status_code == 401
    # The provider's Authorization header is not the proxy's token.
    with client(server, token=None) as anon:
        r = anon.post("/v1/count", json={"messages": []}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 401


def test_foreign_host_or_origin_is_403(http: Any, server: Any) -> None:
    ok = {"messages": conversation(1)}
    assert http.post("/v1/count", json=ok, headers={"Host": "evil.example:80"}).status_code == 403
    assert http.post("/v1/count", json=ok, headers={"Host": "attacker.test"}).status_code == 403
    assert http.post("/v1/count", json=ok, headers={"Origin": "http://evil.example"}).status_code == 403
    assert http.post("/v1/count", json=ok, headers={"Origin": "http://localhost:1"}).status_code == 403
    port = server.settings.port
    assert http.post("/v1/count", json=ok, headers={"Origin": f"http://127.0.0.1:{port}"}).status_code == 200
    assert http.post("/v1/count", json=ok, headers={"Host": f"localhost:{port}"}).status_code == 200
    # No CORS unless configured.
    r = http.post("/v1/count", json=ok, headers={"Origin": f"http://127.0.0.1:{port}"})
    assert "access-control-allow-origin" not in r.headers


def test_cors_only_for_configured_origins() -> None:
    with running(cors_origins=("app://electron",)) as s, client(s) as http:
        pre = http.options(
            "/v1/compact",
            headers={
                "Origin": "app://electron",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-compactor-token, content-type",
            },
        )
        assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "app://electron"
        r = http.post("/v1/count", json={"messages": []}, headers={"Origin": "app://electron"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "app://electron"


def test_a_50_mb_body_is_413(server: Any) -> None:
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * (50 * 1024 * 1024) + b'"}]}'
    with client(server) as http:
        r = http.post("/v1/compact", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413
        # Chunked (no Content-Length): counted while read.
        r = http.post("/v1/compact", content=iter([big[i : i + (1 << 20)] for i in range(0, len(big), 1 << 20)]))
        assert r.status_code == 413


def test_no_auth_is_refused_off_loopback() -> None:
    from context_compactor.errors import ConfigError
    from context_compactor.server.settings import ServerSettings

    with pytest.raises(ConfigError, match="loopback"):
        ServerSettings(host="0.0.0.0", no_auth=True)
    assert ServerSettings().token  # a token is generated when none is given


def test_the_committed_openapi_schema_matches_the_server(http: Any) -> None:
    served = http.get("/openapi.json").json()
    committed = json.loads(OPENAPI.read_text(encoding="utf-8"))
    assert served == committed, "docs/openapi.json is out of date: run `make openapi`"
    assert {"/v1/count", "/v1/check", "/v1/compact", "/v1/sessions"} <= set(committed["paths"])
    assert "summary_of" in committed["components"]["schemas"]["CompactResponse"]["properties"]


def test_importing_the_package_never_imports_the_framework() -> None:
    code = (
        "import sys, context_compactor, context_compactor.cli, context_compactor.server;"
        "context_compactor.cli.build_parser();"
        "bad = [m for m in ('fastapi', 'starlette', 'uvicorn', 'httpx2') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_sessions_round_trip(http: Any) -> None:
    created = http.post("/v1/sessions", json={"session_id": "chat-1", "config": {"max_context_tokens": 12_000}}).json()
    assert created["session_id"] == "chat-1" and created["message_count"] == 0
    messages = conversation(30)
    ids = http.post("/v1/sessions/chat-1/messages", json={"messages": messages}).json()["ids"]
    assert len(ids) == len(messages)
    prepared = http.post("/v1/sessions/chat-1/prepare", json={}).json()
    assert prepared["compacted"] and prepared["result"]["summary_of"]
    assert set(prepared["result"]["summary_of"]) <= set(ids)
    context = http.get("/v1/sessions/chat-1/context").json()
    assert context["ids"] == prepared["result"]["ids"] and context["messages"] == prepared["result"]["messages"]
    assert len(http.get("/v1/sessions/chat-1/history").json()["messages"]) == len(messages)
    records = http.get("/v1/sessions/chat-1/compactions").json()["compactions"]
    assert len(records) == 1 and records[0]["summary_of"] == prepared["result"]["summary_of"]
    originals = http.get(f"/v1/sessions/chat-1/compactions/{records[0]['id']}/originals").json()["messages"]
    assert originals == [
        messages[ids.index(i)] for i in sorted(set(records[0]["summary_of"]) | set(records[0]["edited"]))
    ]
    listed = http.get("/v1/sessions").json()["sessions"]
    assert [s["session_id"] for s in listed] == ["chat-1"] and listed[0]["compactions"] == 1
    assert http.delete("/v1/sessions/chat-1").status_code == 204
    assert http.get("/v1/sessions/chat-1/context").status_code == 404
    assert http.delete("/v1/sessions/chat-1").status_code == 404


def test_the_server_binds_loopback_by_default() -> None:
    from context_compactor.server.settings import ServerSettings

    assert ServerSettings().host == "127.0.0.1"
    with running() as s:
        host = s.sock.getsockname()[0]
        assert host == "127.0.0.1"
        with pytest.raises(OSError), socket.create_connection(("127.0.0.2", s.settings.port), timeout=1):
            pass


def test_retention_deletes_idle_sessions() -> None:
    with running(retention_s=0.3) as server, client(server) as http:
        assert http.post("/v1/sessions", json={"session_id": "old"}).status_code == 201
        http.post("/v1/sessions/old/messages", json={"messages": [{"role": "user", "content": "hi"}]})
        assert http.get("/v1/sessions/old").status_code == 200
        time.sleep(0.5)
        assert http.get("/v1/sessions/old").status_code == 404
        assert http.get("/v1/sessions").json()["sessions"] == []
