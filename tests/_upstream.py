"""An upstream stub on 127.0.0.1 for the proxy's tests: answers like OpenAI (Chat Completions,
Responses) and Anthropic (Messages), streaming or not, gzip on request; records every request's
raw bytes and the exact bytes of every response it sent; checks each compacting request is valid
for its provider and within its model's window (``problems`` lists any that was not).

The model answers with a tool call (so an SDK agent loop goes on) or, streamed, with text.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from context_compactor import TokenCounter, validate_messages

#: The stub's models and windows (the proxy is started with the same table: ``--models``).
WINDOWS = {"gpt-test": 16_000, "claude-test": 16_000, "gpt-big": 1_000_000}
_counter = TokenCounter("approx")


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    sent: bytes = b""  # the response body bytes as written (compressed when gzip)


@dataclass
class Upstream:
    """The stub: ``url``, ``requests`` (``Seen``), ``problems`` (strings)."""

    requests: list[Seen] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    gzip: bool = False
    chunk_delay: float = 0.0
    release: threading.Event = field(default_factory=threading.Event)
    hold_after_first_chunk: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                with stub.lock:
                    stub.requests.append(seen)
                stub._answer(self, seen)

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Upstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    # -- checking --------------------------------------------------------------------------------------

    def _check(self, path: str, body: dict[str, Any]) -> None:
        kind = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic", "/v1/responses": "responses"}[path]
        msgs = body.get("input" if kind == "responses" else "messages")
        system = body.get("system") if kind == "anthropic" else body.get("instructions")
        if not isinstance(msgs, list):
            return
        problems = validate_messages(msgs, format=kind, system=system if kind == "anthropic" else None)
        if problems:
            self.problems.append(f"{path}: invalid: {[p.rule for p in problems]}")
        window = WINDOWS.get(str(body.get("model")))
        reserve = body.get("max_tokens") or body.get("max_completion_tokens") or body.get("max_output_tokens") or 0
        if window is not None:
            tokens = _counter.count_messages(msgs, system=system, tools=body.get("tools"), format=kind)
            if tokens > window - reserve:
                self.problems.append(f"{path}: {tokens} tokens over the window {window} - {reserve}")

    # -- answering -------------------------------------------------------------------------------------

    def _answer(self, h: BaseHTTPRequestHandler, seen: Seen) -> None:
        path = seen.path.split("?")[0]
        if seen.method == "GET" and path == "/v1/models":
            return self._send(h, seen, 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in WINDOWS]})
        if path == "/v1/messages/count_tokens":
            return self._send(h, seen, 200, {"input_tokens": len(seen.raw) // 4})
        if path == "/v1/responses/compact":
            return self._send(h, seen, 200, {"id": "cmp_1", "object": "response.compaction", "output": []})
        if path not in ("/v1/chat/completions", "/v1/messages", "/v1/responses"):
            return self._send(h, seen, 404, {"error": {"message": "no such route", "type": "invalid_request_error"}})
        body = json.loads(seen.raw)
        self._check(path, body)
        # Ids from the request's last message: the same conversation gets the same replies.
        last = (body.get("input" if path == "/v1/responses" else "messages") or [None])[-1]
        n = hashlib.sha256(json.dumps(last, sort_keys=True).encode()).hexdigest()[:12]
        if body.get("stream"):
            return self._stream(h, seen, path, n)
        if path == "/v1/chat/completions":
            reply: dict[str, Any] = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": f"call_{n}",
                                    "type": "function",
                                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat file{n}.py"})},
                                }
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            }
        elif path == "/v1/messages":
            reply = {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [
                    {"type": "text", "text": f"Reading file {n}."},
                    {"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {"cmd": f"cat file{n}.py"}},
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 10},
            }
        else:
            reply = {
                "id": f"resp_{n}",
                "object": "response",
                "created_at": 1_700_000_000,
                "status": "completed",
                "model": body["model"],
                "output": [
                    {
                        "type": "function_call",
                        "id": f"fc_{n}",
                        "call_id": f"call_{n}",
                        "name": "bash",
                        "arguments": json.dumps({"cmd": f"cat file{n}.py"}),
                        "status": "completed",
                    }
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
            }
        self._send(h, seen, 200, reply)

    def _send(self, h: BaseHTTPRequestHandler, seen: Seen, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("x-request-id", f"req_{len(self.requests)}")
        h.send_header("set-cookie", "__cf_bm=a; Path=/")
        h.send_header("set-cookie", "_cfuvid=b; Path=/")
        if self.gzip and "gzip" in seen.headers.get("accept-encoding", ""):
            data = gzip.compress(data, mtime=0)
            h.send_header("content-encoding", "gzip")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        # Recorded before the write: the client may have read it all before the next line runs.
        seen.sent = data
        h.wfile.write(data)

    def _events(self, path: str, n: str) -> list[bytes]:
        words = [f"word{i} " for i in range(12)]
        if path == "/v1/messages":
            events: list[tuple[str, dict[str, Any]]] = [
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": f"msg_{n}",
                            "type": "message",
                            "role": "assistant",
                            "model": "claude-test",
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": {"input_tokens": 100, "output_tokens": 1},
                        },
                    },
                ),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                ),
            ]
            events += [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
                )
                for w in words
            ]
            events += [
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 12},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
            return [f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events]
        chunks = [{"role": "assistant", "content": ""}] + [{"content": w} for w in words]
        out = [
            b"data: "
            + json.dumps(
                {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion.chunk",
                    "created": 1_700_000_000,
                    "model": "gpt-test",
                    "choices": [{"index": 0, "delta": d, "finish_reason": None}],
                }
            ).encode()
            + b"\n\n"
            for d in chunks
        ]
        done = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        return [*out, b"data: " + json.dumps(done).encode() + b"\n\n", b"data: [DONE]\n\n"]

    def _stream(self, h: BaseHTTPRequestHandler, seen: Seen, path: str, n: str) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        events = self._events(path, n)
        # Recorded before the writes: the client may have read it all before a later line runs.
        seen.sent = b"".join(events)
        for i, event in enumerate(events):
            h.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            h.wfile.flush()
            if i == 0 and self.hold_after_first_chunk:
                self.release.wait(10)
            if self.chunk_delay:
                time.sleep(self.chunk_delay)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
