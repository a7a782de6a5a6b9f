"""The security gate in front of every route: Host and Origin allow-lists, the token, CORS, the body limit.

A plain ASGI middleware (no framework type needed), outermost, so no route runs before it:

1. ``Host`` must name an allowed host (any port): a DNS-rebinding page sends its own name → 403.
2. ``Origin``, when sent, must be the server's own or an allowed one → 403. Node, the SDKs and
   curl send none.
3. ``X-Compactor-Token`` must match (constant-time) on every route but the page's shell (``/``,
   ``/static/…``: no data in them; the page then sends the token with every call) → 401. Never
   ``Authorization``: that header is the provider's key and is forwarded as it is.
4. A body over the limit → 413, from ``Content-Length`` before reading, or while reading a
   chunked body.
5. CORS headers only for configured origins (preflight answered here).

Errors are JSON ``{"error": {"type", "message"}}``: the OpenAI SDK and Anthropic's both read
``error.message`` from such a body, so a client sees the reason in its exception.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from context_compactor.server.settings import TOKEN_HEADER, ServerSettings

__all__ = ["SecurityMiddleware", "error_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Routes that need no token: the page's shell (it holds no data).
_OPEN_PATHS = ("/", "/favicon.ico")
_OPEN_PREFIX = "/static/"


def error_body(kind: str, message: str) -> bytes:
    """The JSON error body every refusal uses."""
    return json.dumps({"error": {"type": kind, "message": message}}).encode()


async def _refuse(send: Send, status: int, kind: str, message: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = error_body(kind, message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8787`` → ``[::1]``, ``a:80`` → ``a``)."""
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class SecurityMiddleware:
    """Wraps the app; see the module's notes for the order of the checks."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = {h.lower() for h in settings.allowed_hosts}
        self.origins = {o.rstrip("/").lower() for o in settings.allowed_origins}
        self.cors = {o.rstrip("/").lower() for o in settings.cors_origins}
        self.token = (settings.token or "").encode()

    def _origin_ok(self, origin: str) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in self.origins or origin in self.cors:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        # The page served by this server: same host name (allowed) and the server's port.
        return name in self.hosts and (parts.port or 80) == self.settings.port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_name(headers.get("host", "")).lower()
        if host not in self.hosts:
            await _refuse(send, 403, "forbidden_host", "Host not allowed (see --allow-host)")
            return
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin):
            await _refuse(send, 403, "forbidden_origin", "Origin not allowed (see --allow-origin)")
            return
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None and origin.rstrip("/").lower() in self.cors:
            cors = [
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"vary", b"Origin"),
                (b"access-control-expose-headers", b"x-compactor, x-compactor-saved-tokens"),
            ]
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                allow = [
                    (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
                    (b"access-control-allow-headers", headers.get("access-control-request-headers", "").encode()),
                    (b"access-control-max-age", b"600"),
                ]
                await send({"type": "http.response.start", "status": 204, "headers": cors + allow})
                await send({"type": "http.response.body", "body": b""})
                return
        path: str = scope["path"]
        open_path = scope["method"] == "GET" and (path in _OPEN_PATHS or path.startswith(_OPEN_PREFIX))
        if not self.settings.no_auth and not open_path:
            given = headers.get(TOKEN_HEADER, "").encode("latin-1")
            if not given or not hmac.compare_digest(given, self.token):
                await _refuse(
                    send, 401, "unauthorized", f"missing or wrong {TOKEN_HEADER} header (the server's token)", cors
                )
                return
        limit = self.settings.max_body_bytes
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _refuse(send, 413, "request_too_large", f"request body over {limit} bytes", cors)
            return
        await self._call(scope, receive, send, limit, cors)

    async def _call(self, scope: Scope, receive: Receive, send: Send, limit: int, cors: list[Any]) -> None:
        headers = {k.lower() for k, _ in scope["headers"]}
        if b"content-length" not in headers and scope["method"] in ("POST", "PUT", "PATCH"):
            # A chunked body: read it whole (up to the limit) before any route sees it.
            chunks: list[bytes] = []
            seen = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                chunk = message.get("body", b"")
                seen += len(chunk)
                if seen > limit:
                    await _refuse(send, 413, "request_too_large", f"request body over {limit} bytes", cors)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            body = b"".join(chunks)
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            receive = replay

        async def sending(message: Message) -> None:
            if cors and message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *cors]
            await send(message)

        await self.app(scope, receive, sending if cors else send)
