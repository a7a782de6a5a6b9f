"""The recall MCP server, driven by the ``mcp`` SDK's own client over stdio and streamable HTTP:
the tools answer from one session's originals only; HTTP refuses a foreign Origin and a missing
or wrong token."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (extra [mcp])")
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from context_compactor import ContextCompactor, Session
from context_compactor.recall import Recall, recall_ids
from context_compactor.stores import SessionStore


def run_of(marker: str) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": f"Audit the logs ({marker})."}]
    for i in range(14):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat log"}'}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        body = "".join(f"{marker} entry {i}.{k}: 状态 ok\n" for k in range(250))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    return msgs


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A store with two compacted sessions; returns its path, an id of session a, its first page."""
    path = str(tmp_path_factory.mktemp("mcp") / "sessions.db")
    cc = ContextCompactor(max_context_tokens=30_000, recall=True)
    for sid, marker in (("a", "ALPHA_LOG"), ("b", "BRAVO_SECRET")):
        with Session(sid, compactor=cc, store=path) as s:
            s.extend(run_of(marker))
            s.prepare(force=True)
    st = SessionStore(path)
    recall = Recall.from_store(st, "a", config=cc.config)
    id = next(i for i, t in recall.originals() if "ALPHA_LOG" in t)
    page = recall(id)
    st.close()
    return path, id, page


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def drive(client: Client, id: str) -> dict[str, str]:
    async with client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        return {
            "names": json.dumps(names),
            "recall": text_of(await client.call_tool("recall", {"id": id})),
            "own": text_of(await client.call_tool("search", {"query": "ALPHA_LOG entry 3."})),
            "other": text_of(await client.call_tool("search", {"query": "BRAVO", "regex": False})),
            "regex_other": text_of(await client.call_tool("search", {"query": "BRAVO_\\w+", "regex": True})),
            "unknown": text_of(await client.call_tool("recall", {"id": "000000000000"})),
        }


def check(got: dict[str, str], page: str) -> None:
    assert got["names"] == '["recall", "search"]'
    assert got["recall"] == page
    assert "ALPHA_LOG entry 3.0:" in got["own"] and got["own"].count("\n") == 20  # bounded hits
    # Session b's text is in the same store, never in session a's answers.
    for k in ("other", "regex_other"):
        assert "BRAVO" not in got[k].partition("\n")[2] and "0 matching lines" in got[k]
    assert "no original is stored" in got["unknown"]


def test_stdio(store: tuple[str, str, str]) -> None:
    path, id, page = store
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "context_compactor.cli", "mcp", "--store", path, "--session", "a"]
    )
    check(asyncio.run(drive(Client(params), id)), page)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(store: tuple[str, str, str]) -> Iterator[tuple[str, str]]:
    import uvicorn

    from context_compactor.mcp_server import build_server, http_app

    path, _, _ = store
    st = SessionStore(path)
    port, token = free_port(), "t0ken-for-tests"
    app = http_app(build_server(Recall.from_store(st, "a")), token, port=port)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp", token
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        st.close()


def test_streamable_http(store: tuple[str, str, str], http_server: tuple[str, str]) -> None:
    _, id, page = store
    url, token = http_server
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    check(asyncio.run(drive(Client(streamable_http_client(url, http_client=http)), id)), page)


def test_http_refuses_a_foreign_origin_and_a_missing_token(http_server: tuple[str, str]) -> None:
    url, token = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx2.Client(timeout=10) as c:
        assert c.post(url, json=body, headers=headers).status_code == 401
        wrong = {**headers, "Authorization": "Bearer nope"}
        assert c.post(url, json=body, headers=wrong).status_code == 401
        foreign = {**headers, "Authorization": f"Bearer {token}", "Origin": "https://evil.example"}
        assert c.post(url, json=body, headers=foreign).status_code == 403
        rebound = {**headers, "Authorization": f"Bearer {token}", "Host": "evil.example"}
        assert c.post(url, json=body, headers=rebound).status_code in (403, 421)

    async def without_token() -> None:
        async with Client(streamable_http_client(url)) as client:
            await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401 differs between releases
        asyncio.run(without_token())


def test_ids_of_session_a_resolve_from_its_context(store: tuple[str, str, str]) -> None:
    path, _, _ = store
    cc = ContextCompactor(max_context_tokens=30_000, recall=True)
    with Session("a", compactor=cc, store=path) as s:
        recall = Recall(s)
        ids = [i for m in s.context() for i in recall_ids(json.dumps(m, ensure_ascii=False))]
        assert ids and all(recall.lookup(i) for i in ids)


def test_cli_needs_a_session_with_a_store(store: tuple[str, str, str], tmp_path: Path) -> None:
    from context_compactor.cli import main

    path, _, _ = store
    assert main(["mcp", "--store", path]) == 2
    assert main(["mcp", "--store", path, "--session", "nope"]) == 2
