"""A local stand-in for ``POST /v1/responses`` that rejects what the OpenAI Responses API rejects.

It does not import the library: its rules are written from the provider's 400 errors as users
report them (GitHub issues of openai-agents-python, openai-agents-js, vercel/ai, continue, codex),
and it answers with those texts verbatim, in the provider's error shape
(``{"error": {"message", "type": "invalid_request_error", "param": "input", "code": null}}``):

- ``No tool call found for function call output with call_id {call_id}.``
- ``No tool output found for function call {call_id}.`` (a call answered by nothing while the
  user speaks again; a trailing call may wait)
- ``Item '{id}' of type 'reasoning' was provided without its required following item.``
- ``Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again
  with `store` set to true, or remove this item from your input.`` (``store=false``: an
  ``item_reference``, or a reasoning item with an ``id`` and no ``encrypted_content``)
- ``Duplicate item found with id {id}. Remove duplicate items from your input and try again.``
  (two items with one ``id``, or two calls with one ``call_id``)

A request it accepts gets a minimal completed response with one assistant message.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CALLS = {
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
    "tool_search_call",
}
NOT_PERSISTED = (
    "Item with id '{id}' not found. Items are not persisted when `store` is set to false. "
    "Try again with `store` set to true, or remove this item from your input."
)


def _is_user(item: dict[str, Any]) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "user"


def _assistant_side(item: dict[str, Any]) -> bool:
    """An item a reasoning item may precede: an assistant message, a call, a server tool item."""
    t = item.get("type", "message")
    if t == "message":
        return item.get("role") == "assistant"
    return not (t.endswith("_output") or t in ("reasoning", "item_reference", "mcp_approval_response"))


def problem(body: dict[str, Any]) -> str | None:
    """The error the provider answers for this request body, or None."""
    items = body.get("input")
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return "Invalid type for 'input'."
    store = body.get("store", True)
    ids: set[str] = set()
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            return f"Invalid type for 'input[{i}]'."
        t = it.get("type", "message")
        iid = it.get("id")
        if isinstance(iid, str) and t != "item_reference":
            if iid in ids:
                return f"Duplicate item found with id {iid}. Remove duplicate items from your input and try again."
            ids.add(iid)
        stored_only = t == "item_reference" or (t == "reasoning" and iid and not it.get("encrypted_content"))
        if store is False and stored_only:
            return NOT_PERSISTED.format(id=iid)
        if t in CALLS:
            cid = it.get("call_id")
            if cid in calls:
                return f"Duplicate item found with id {cid}. Remove duplicate items from your input and try again."
            calls[cid] = i
        elif t.endswith("_output"):
            cid = it.get("call_id")
            if cid not in calls:
                return f"No tool call found for function call output with call_id {cid}."
            answered.add(cid)
        elif t == "reasoning":
            j = i + 1
            while j < len(items) and isinstance(items[j], dict) and items[j].get("type") == "reasoning":
                j += 1
            if j == len(items) or not _assistant_side(items[j]):
                return f"Item '{iid}' of type 'reasoning' was provided without its required following item."
        if _is_user(it):
            for cid, at in calls.items():
                if cid not in answered and at < i:
                    return f"No tool output found for function call {cid}."
    return None


class _Handler(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(size) or b"{}")
        self.server.requests.append(body)  # type: ignore[attr-defined]
        if self.path.rstrip("/") != "/v1/responses":
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        err = problem(body)
        if err is not None:
            error = {"message": err, "type": "invalid_request_error", "param": "input", "code": None}
            self._send(400, {"error": error})
            return
        self._send(
            200,
            {
                "id": "resp_stub",
                "object": "response",
                "created_at": 0,
                "model": body.get("model", "stub"),
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": "msg_stub",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                    }
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ResponsesStub:
    """``with ResponsesStub() as stub: OpenAI(base_url=stub.base_url, api_key="x")``."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.requests = []  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ResponsesStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
