"""A local HTTP stub that answers like the OpenAI Chat Completions and Anthropic Messages APIs.

Binds 127.0.0.1 on a free port, serves from a daemon thread, records every request, and answers
each path from a queue of scripted :class:`Reply` objects (a success reply when the queue is
empty). Error bodies follow the real APIs' JSON shapes. Slow replies wait on an event that
:meth:`StubServer.stop` sets, so no handler outlives the test by more than a moment.

    with StubServer() as server:
        server.enqueue("/v1/chat/completions", openai_error(429))
        client = openai.OpenAI(base_url=server.url("/v1"), api_key="test", max_retries=0)
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
SUMMARY_TEXT = "<summary>The user asked to fix a failing test; the agent ran many bash commands.</summary>"


@dataclass
class Reply:
    """One scripted answer: status, JSON (or raw bytes) body, headers, delay before answering."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Received:
    """One request as the server saw it (header names lower-cased, JSON body parsed)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def openai_ok(
    text: str = SUMMARY_TEXT, *, finish_reason: str = "stop", model: str = "gpt-test", content: Any = ...
) -> Reply:
    """A Chat Completions success body."""
    return Reply(
        200,
        {
            "id": "chatcmpl-stub1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text if content is ... else content,
                        "refusal": None,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": 1234,
                "completion_tokens": 56,
                "total_tokens": 1290,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
            },
            "system_fingerprint": "fp_stub",
        },
        {"x-request-id": "req_stub"},
    )


def anthropic_ok(
    text: str = SUMMARY_TEXT, *, stop_reason: str = "end_turn", model: str = "claude-test", blocks: Any = None
) -> Reply:
    """A Messages success body (``blocks`` replaces the single text block)."""
    content = blocks if blocks is not None else [{"type": "text", "text": text}]
    return Reply(
        200,
        {
            "id": "msg_stub01",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 1234,
                "output_tokens": 56,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
        {"request-id": "req_stub"},
    )


_OPENAI_ERRORS: dict[int, tuple[str, str, str | None, str | None]] = {
    400: (
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 "
        "tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "messages",
        "context_length_exceeded",
    ),
    401: (
        "Incorrect API key provided: test. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        None,
        "invalid_api_key",
    ),
    404: (
        "The model `gpt-test` does not exist or you do not have access to it.",
        "invalid_request_error",
        None,
        "model_not_found",
    ),
    429: (
        "Rate limit reached for gpt-test in organization org-stub on tokens per min (TPM): Limit 30000, "
        "Used 30000, Requested 1290. Please try again in 2.58s.",
        "tokens",
        None,
        "rate_limit_exceeded",
    ),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None, None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None, None),
    529: ("The engine is currently overloaded, please try again later.", "server_error", None, None),
}

_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "prompt is too long: 210463 tokens > 200000 maximum"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "model: claude-test"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50,000 input tokens per minute.",
    ),
    500: ("api_error", "Internal server error"),
    503: ("overloaded_error", "Overloaded"),
    529: ("overloaded_error", "Overloaded"),
}


def _retry_headers(status: int) -> dict[str, str]:
    return {"retry-after-ms": "0", "retry-after": "0"} if status in (429, 503, 529) else {}


def openai_error(status: int, message: str | None = None) -> Reply:
    """An OpenAI error reply: ``{"error": {"message", "type", "param", "code"}}``."""
    msg, typ, param, code = _OPENAI_ERRORS[status]
    body = {"error": {"message": message or msg, "type": typ, "param": param, "code": code}}
    return Reply(status, body, {"x-request-id": "req_stub", **_retry_headers(status)})


def anthropic_error(status: int, message: str | None = None) -> Reply:
    """An Anthropic error reply: ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    typ, msg = _ANTHROPIC_ERRORS[status]
    body = {"type": "error", "error": {"type": typ, "message": message or msg}, "request_id": "req_stub01"}
    return Reply(status, body, {"request-id": "req_stub01", **_retry_headers(status)})


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing idles at shutdown

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        stub = self.server.stub
        path = self.path.split("?", 1)[0]
        stub._record(Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        reply = stub._next(path)
        if reply.delay:
            stub._release.wait(reply.delay)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            headers = {"Content-Type": "application/json", **reply.headers}
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout, cancellation)
            pass

    do_POST = _serve
    do_GET = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubServer


class StubServer:
    """The stub: ``start()``/``stop()`` (or a ``with`` block), ``enqueue()``, ``requests``."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._queues: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "not started"
        return int(self._httpd.server_address[1])

    def url(self, path: str = "") -> str:
        """``http://127.0.0.1:{port}{path}``."""
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> StubServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.stub = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake slow handlers, stop serving, close the socket (bounded)."""
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, path: str, *replies: Reply) -> None:
        """Answer the next requests to ``path`` with ``replies``, in order."""
        with self._lock:
            self._queues.setdefault(path, deque()).extend(replies)

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies received on ``path``."""
        with self._lock:
            return [r.body for r in self.requests if r.path.split("?", 1)[0] == path]

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def _next(self, path: str) -> Reply:
        with self._lock:
            queue = self._queues.get(path)
            if queue:
                return queue.popleft()
        if path.endswith("/messages"):
            return anthropic_ok()
        if path.endswith("/chat/completions"):
            return openai_ok()
        return Reply(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
