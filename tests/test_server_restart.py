"""A restarted ``serve`` knows its sessions as they were created: the format, system prompt, tools,
config and summarizer name are in the store (its meta), not in the process that created them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _messages import conversation
from _server import client, running
from _stub_server import StubServer

SYSTEM = "Answer briefly, in 简体中文 when the user writes Chinese."
TOOLS = [{"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {}}}]
CONFIG = {"max_context_tokens": 12_000}


@pytest.fixture(scope="module")
def summarizer() -> Any:
    server = StubServer().start()
    yield server
    server.stop()


def _settings(summarizer: Any, store: Path) -> dict[str, Any]:
    from context_compactor.server.settings import SummarizerEndpoint

    return {"store": str(store), "summarizers": {"sum": SummarizerEndpoint("sum", summarizer.url("/v1"), "sum-model")}}


def test_a_restarted_server_reopens_a_session_as_it_was_created(summarizer: Any, tmp_path: Path) -> None:
    settings = _settings(summarizer, tmp_path / "s.db")
    create = {"format": "responses", "system": SYSTEM, "tools": TOOLS, "config": CONFIG, "summarizer": "sum"}
    with running(**settings) as server, client(server) as http:
        # An empty Responses session: nothing in its messages says Responses, only what it was created with.
        r = http.post("/v1/sessions", json={"session_id": "items", **create})
        assert r.status_code == 201, r.text
        before = r.json()
        r = http.post("/v1/sessions", json={"session_id": "chat", "config": CONFIG, "summarizer": "sum"})
        assert r.status_code == 201, r.text
        http.post("/v1/sessions/chat/messages", json={"messages": conversation(30)}).raise_for_status()

    with running(**settings) as server, client(server) as http:
        info = http.get("/v1/sessions/items").json()
        assert info["format"] == "responses"
        assert info["config"] == CONFIG and info["summarizer"] == "sum"
        assert info["check"]["budget"] == before["check"]["budget"] < 12_000  # the session's window, not the default
        ctx = http.get("/v1/sessions/items/context").json()
        assert ctx["system"] == SYSTEM and ctx["tools"] == TOOLS

        # The summarizer name is in force: a forced compaction asks the allow-listed endpoint.
        asked = len(summarizer.bodies("/v1/chat/completions"))
        out = http.post("/v1/sessions/chat/prepare", json={"force": True}).json()
        assert out["compacted"] and out["result"]["summary_source"] == "llm"
        assert len(summarizer.bodies("/v1/chat/completions")) > asked
        assert summarizer.requests[-1].body["model"] == "sum-model"
        listed = {s["session_id"]: s for s in http.get("/v1/sessions").json()["sessions"]}
        assert listed["chat"]["summarizer"] == "sum" and listed["chat"]["config"] == CONFIG


def test_a_session_created_again_replaces_what_it_was_created_with(summarizer: Any, tmp_path: Path) -> None:
    settings = _settings(summarizer, tmp_path / "s.db")
    with running(**settings) as server, client(server) as http:
        http.post("/v1/sessions", json={"session_id": "a", "config": CONFIG, "summarizer": "sum"}).raise_for_status()
        http.post("/v1/sessions", json={"session_id": "a", "format": "anthropic"}).raise_for_status()
    with running(**settings) as server, client(server) as http:
        info = http.get("/v1/sessions/a").json()
        assert (info["format"], info["config"], info["summarizer"]) == ("anthropic", None, None)
        # Deleted, it is gone with what it was created with.
        assert http.delete("/v1/sessions/a").status_code == 204
        assert http.get("/v1/sessions/a").status_code == 404
