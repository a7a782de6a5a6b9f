"""A local stand-in for the providers' compaction endpoints (does not import the library).

- ``POST /v1/responses/compact`` (OpenAI): answers a ``response.compaction`` object whose
  ``output`` is the request's user messages followed by one ``compaction`` item (the shape the
  SDK's ``CompactedResponse`` documents), ``encrypted_content`` opaque.
- ``POST /v1/messages`` with ``compaction`` in the body (Anthropic): demands the
  ``anthropic-beta: compact-2026-09-04`` header and a first ``user`` message, then answers a
  message holding only a ``compaction`` block (``stop_reason`` ``"compaction"``) whose readable
  ``content`` starts with the first user text it was sent.

``fail = (status, body)`` makes every request fail with that status; ``delay`` makes it slow
(released at ``stop()``). Every request body is recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BETA = "compact-2026-09-04"


def _user_text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    return " ".join(p.get("text", "") for p in c or () if isinstance(p, dict) and isinstance(p.get("text"), str))


def openai_compact(body: dict[str, Any]) -> tuple[int, Any]:
    items = body.get("input")
    if not isinstance(items, list) or not body.get("model"):
        return 400, {"error": {"message": "input must be a list", "type": "invalid_request_error", "param": "input"}}
    users = [
        {
            "id": f"msg_u{k}",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": _user_text(m)}],
        }
        for k, m in enumerate(items)
        if m.get("role") == "user" and m.get("type", "message") == "message"
    ]
    compaction = {"id": "cmp_stub01", "type": "compaction", "encrypted_content": "gAAAA-opaque-" + str(len(items))}
    usage = {
        "input_tokens": 900,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 80,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 980,
    }
    out = {"id": "resp_cmp01", "object": "response.compaction", "created_at": 1, "output": [*users, compaction]}
    return 200, {**out, "usage": usage}


def anthropic_compact(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    def error(msg: str) -> tuple[int, Any]:
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": msg}}

    if BETA not in headers.get("anthropic-beta", ""):
        return error("compaction: this parameter requires the compact-2026-09-04 beta")
    if body.get("compaction", {}).get("type") != "summarize":
        return error("compaction.type: Input should be 'summarize'")
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        return error('messages: first message must use the "user" role')
    first = next((_user_text(m) for m in messages if m.get("role") == "user" and _user_text(m).strip()), "")
    block = {
        "type": "compaction",
        "content": f"{first}\nSummary: {len(messages)} messages compacted by the provider.",
        "encrypted_content": "enc-opaque",
        "signature": "sig-stub",
        "tool_changes": [],
    }
    usage = {"input_tokens": 1500, "output_tokens": 120}
    msg = {"id": "msg_cmp01", "type": "message", "role": "assistant", "model": body.get("model"), "content": [block]}
    return 200, {**msg, "stop_reason": "compaction", "stop_sequence": None, "usage": usage}


class _Handler(BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        stub: NativeStub = self.server.stub
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        with stub.lock:
            stub.requests.append((path, headers, body))
        if stub.delay:
            stub.release.wait(stub.delay)
        if stub.fail is not None:
            status, reply = stub.fail
        elif path == "/v1/responses/compact":
            status, reply = openai_compact(body)
        elif path == "/v1/messages" and "compaction" in body:
            status, reply = anthropic_compact(body, headers)
        else:
            status, reply = 404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}
        data = json.dumps(reply).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass


class NativeStub:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.fail: tuple[int, Any] | None = None
        self.delay = 0.0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.stub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def __enter__(self) -> NativeStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
