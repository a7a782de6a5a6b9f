"""The server as a process: ``kill -9`` during a session's appends loses no acknowledged message
(SQLite and PostgreSQL); restarting PostgreSQL under a running server costs at most the requests
in flight, answered with a clear 503, and the store reconnects on its own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from _server import TOKEN, httpx2

KILLS = int(os.environ.get("CC_SERVER_KILLS", "1"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(store: str, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``context-compactor serve`` as its own process, until it answers."""
    cmd = [sys.executable, "-m", "context_compactor.cli", "serve", "--port", str(port), "--store", store]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(cmd, env={**os.environ, "CONTEXT_COMPACTOR_TOKEN": TOKEN}, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"the server did not start: {log.read().decode()}") from None
                time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def _client(port: int) -> Any:
    return httpx2.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"X-Compactor-Token": TOKEN}, timeout=10, trust_env=False
    )


def _appender(port: int, acked: list[str], stop: threading.Event, start: int) -> None:
    """Append one message per request; remember each one the server acknowledged."""
    i = start
    with _client(port) as http:
        while not stop.is_set():
            content = f"message {i}"
            role = "user" if i % 2 == 0 else "assistant"
            try:
                r = http.post("/v1/sessions/s1/messages", json={"messages": [{"role": role, "content": content}]})
            except httpx2.HTTPError:
                return  # the server is gone
            if r.status_code == 200:
                acked.append(content)
            i += 1


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_during_appends_loses_no_acknowledged_message(backend: str, tmp_path: Path, request: Any) -> None:
    store = str(tmp_path / "s.db") if backend == "sqlite" else request.getfixturevalue("postgres_server").new_database()
    port = _free_port()
    acked: list[str] = []
    with serve(store, port), _client(port) as http:
        assert http.post("/v1/sessions", json={"session_id": "s1", "format": "openai"}).status_code == 201
    for k in range(KILLS):
        with serve(store, port) as proc:
            stop = threading.Event()
            t = threading.Thread(target=_appender, args=(port, acked, stop, 1000 * k))
            t.start()
            time.sleep(1.0 + 0.3 * k)
            proc.kill()  # SIGKILL: no shutdown, no flush
            proc.wait()
            stop.set()
            t.join(10)
    with serve(store, port), _client(port) as http:
        history = http.get("/v1/sessions/s1/history").json()["messages"]
    stored = [m["content"] for m in history]
    assert len(acked) > 10
    missing = [c for c in acked if c not in stored]
    assert missing == []
    # In order, and nothing that was acknowledged twice.
    assert [c for c in stored if c in set(acked)] == acked


def _restart(pg: Any) -> None:
    """Stop the cluster (immediate: connections drop as in a crash) and start it again."""
    data = str(pg.root / "data")
    assert pg._run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").returncode == 0
    options = f"-p {pg.port} -k {pg.root} -c listen_addresses=127.0.0.1 -c fsync=off"
    r = pg._run("pg_ctl", "-D", data, "-o", options, "-l", str(pg.root / "server.log"), "-w", "start")
    assert r.returncode == 0, r.stderr


def test_a_postgresql_restart_costs_only_the_requests_in_flight(request: Any) -> None:
    from _pg_server import start_server

    try:
        pg = start_server()
    except RuntimeError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(str(e))
        pytest.skip(str(e))
    try:
        port = _free_port()
        with serve(pg.new_database(), port), _client(port) as http:
            assert http.post("/v1/sessions", json={"session_id": "s1"}).status_code == 201
            first = {"messages": [{"role": "user", "content": "a"}]}
            assert http.post("/v1/sessions/s1/messages", json=first).is_success
            _restart(pg)
            statuses = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                r = http.post("/v1/sessions/s1/messages", json={"messages": [{"role": "user", "content": "b"}]})
                statuses.append(r.status_code)
                if r.status_code == 200:
                    break
                assert r.status_code == 503 and r.json()["error"]["type"] == "store_unavailable"
                time.sleep(0.2)
            assert statuses[-1] == 200 and statuses.count(503) <= 1, statuses
            history = http.get("/v1/sessions/s1/history").json()["messages"]
            assert [m["content"] for m in history] == ["a", "b"]
    finally:
        pg.stop()
