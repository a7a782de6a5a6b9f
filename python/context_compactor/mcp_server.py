"""An MCP server over one session's originals: the ``recall`` and ``search`` tools, over stdio or
streamable HTTP on loopback (``context-compactor mcp``; the ``[mcp]`` extra).

The server reads one session (a :class:`~context_compactor.SessionStore` and a session id) or
one ``offload_dir``: a search never reads another session's originals. Over HTTP it binds
127.0.0.1 only, answers only requests that carry ``Authorization: Bearer <token>`` (compared in
constant time), and refuses a request whose ``Origin`` is not a loopback origin (a web page the
user visits cannot reach it: DNS rebinding and cross-site requests are refused before the MCP
layer sees them); the SDK's own Host and Origin checks run too.

Example:
    server = build_server(Recall.from_store(SessionStore("agent.db"), "ticket-42"))
    server.run()                                  # stdio
"""

from __future__ import annotations

import hmac
import re
from typing import Any

from context_compactor.recall import DESCRIPTION, TOOL_NAME, Recall

__all__ = ["SEARCH_DESCRIPTION", "build_server", "http_app", "loopback_origin", "serve_http"]

SEARCH_DESCRIPTION = (
    "Search the original texts that context compaction replaced in this conversation (substring, or a "
    "regular expression with regex=true). Returns matching lines as <id>:<line>: <text>; read more of one "
    'with recall("<id>", pattern=...).'
)

_LOOPBACK = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$")


def loopback_origin(origin: str) -> bool:
    """Whether an ``Origin`` header names this machine (``http://127.0.0.1:PORT``, ``localhost``, ``[::1]``)."""
    return bool(_LOOPBACK.match(origin))


def build_server(recall: Recall, *, name: str = "context-compactor") -> Any:
    """An ``mcp`` ``MCPServer`` with the ``recall`` and ``search`` tools over ``recall``'s originals."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name, instructions="Read back what context compaction replaced in this conversation.")

    @server.tool(name=TOOL_NAME, description=DESCRIPTION, structured_output=False)
    def recall_tool(id: str, start: int = 0, count: int | None = None, pattern: str | None = None) -> str:
        return recall(id, start=start, count=count, pattern=pattern)

    @server.tool(name="search", description=SEARCH_DESCRIPTION, structured_output=False)
    def search(query: str, regex: bool = False, max_hits: int = 20) -> str:
        return recall.search(query, regex=regex, max_hits=max_hits)

    return server


def http_app(server: Any, token: str, *, port: int) -> Any:
    """The streamable HTTP app (at ``/mcp``) behind the token and the loopback Origin check."""
    if not token:
        raise ValueError("an MCP server over HTTP needs a token")
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.responses import JSONResponse

    security = TransportSecuritySettings(
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"],
    )
    inner = server.streamable_http_app(transport_security=security, host="127.0.0.1")
    expected = f"Bearer {token}".encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            origin = headers.get(b"origin", b"").decode("latin-1")
            if origin and not loopback_origin(origin):
                await JSONResponse({"error": "origin not allowed"}, status_code=403)(scope, receive, send)
                return
            if not hmac.compare_digest(headers.get(b"authorization", b""), expected):
                resp = JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
                await resp(scope, receive, send)
                return
        await inner(scope, receive, send)

    return app


def serve_http(server: Any, token: str, *, port: int) -> None:
    """Serve :func:`http_app` on 127.0.0.1:``port`` until interrupted."""
    import uvicorn

    uvicorn.run(http_app(server, token, port=port), host="127.0.0.1", port=port, log_level="warning")
