"""The compacting proxy: ``/v1/chat/completions``, ``/v1/responses``, Anthropic's ``/v1/messages``
compact when needed; every other ``/v1/…`` route passes through untouched.

Design note — the bytes. The reports about the best-known proxy in this space decided how this
one forwards: the response is streamed back as raw bytes as they arrive (``aiter_raw``: no
decoding, no SSE re-framing, so nothing of a stream is lost and gzip stays gzip); hop-by-hop
headers (``transfer-encoding``, ``connection``, …) are dropped both ways, since a replayed
``transfer-encoding`` over a body the server re-frames empties the response; ``Content-Length``
is recomputed only for a rewritten request body. The client's provider credentials
(``Authorization``, ``x-api-key``) are forwarded as they are and never logged or stored (the
prefix memory keeps a SHA-256 of them); the proxy's own ``X-Compactor-Token`` is not forwarded.
Every response says what ran in ``X-Compactor``.

The upstream client is httpx2, the client the provider SDKs use; the request is built as an
``httpx2.Request`` and sent with ``client.send``, so the client adds none of its default headers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx2
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from context_compactor.server.compaction import Compactors
from context_compactor.server.rewrite import Decision, Rewriter
from context_compactor.server.settings import TOKEN_HEADER, ServerSettings
from context_compactor.server.windows import Windows

__all__ = ["Forwarder", "router"]

log = logging.getLogger("context_compactor.server")

router = APIRouter()

#: Never forwarded either way (RFC 9110 §7.6.1, and the proxy's own).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        TOKEN_HEADER,
    }
)
#: The compacting routes (POST) and the format of each.
COMPACTING = {"chat/completions": "openai", "responses": "responses", "messages": "anthropic"}


class Forwarder:
    """The upstream client and the rewriter, for the app's lifetime."""

    def __init__(self, settings: ServerSettings, compactors: Compactors) -> None:
        self.settings = settings
        self.client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(connect=10.0, read=600.0, write=60.0, pool=60.0),
            limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=200),
            follow_redirects=False,
            trust_env=False,
        )
        self.rewriter = Rewriter(compactors, Windows(settings.models), settings.proxy_summarizer)

    async def aclose(self) -> None:
        self.rewriter.close()
        await self.client.aclose()

    def upstream(self, path: str, headers: dict[str, str]) -> str:
        anthropic = path.startswith("messages") or "anthropic-version" in headers
        base = self.settings.upstream_anthropic if anthropic else self.settings.upstream_openai
        return f"{base}/v1/{path}"


def _forward_headers(request: Request) -> list[tuple[str, str]]:
    drop = set(HOP_BY_HOP) | {"content-length"}
    connection = request.headers.get("connection", "")
    drop |= {h.strip().lower() for h in connection.split(",") if h.strip()}
    return [(k, v) for k, v in request.headers.items() if k.lower() not in drop]


def _response_headers(upstream: httpx2.Response, status: str, saved: int) -> list[tuple[bytes, bytes]]:
    """The upstream's headers as they came (repeated ones, ``set-cookie``, kept apart), minus hop-by-hop."""
    drop = set(HOP_BY_HOP)
    drop |= {h.strip().lower() for h in upstream.headers.get("connection", "").split(",") if h.strip()}
    out = [(k, v) for k, v in upstream.headers.raw if k.decode("latin-1").lower() not in drop]
    out.append((b"x-compactor", status.encode("latin-1", "replace")))
    if saved:
        out.append((b"x-compactor-saved-tokens", str(saved).encode()))
    return out


@router.get("/v1/compactor/stats", tags=["proxy"], summary="What the proxy did since it started")
def stats(request: Request) -> dict[str, int]:
    forwarder: Forwarder = request.app.state.forwarder
    return {**forwarder.rewriter.counts, "prefixes": len(forwarder.rewriter.memory)}


@router.api_route(
    "/v1/{path:path}",
    methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"],
    include_in_schema=False,
)
async def forward(path: str, request: Request) -> Response:
    forwarder: Forwarder = request.app.state.forwarder
    raw = await request.body()
    kind = COMPACTING.get(path) if request.method == "POST" else None
    decision = Decision("passthrough")
    if kind is not None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        decision = await run_in_threadpool(forwarder.rewriter.decide, kind, raw, headers)
        if decision.error is not None:
            status, error = decision.error
            return Response(error, status, {"content-type": "application/json", "x-compactor": decision.status})
    url = forwarder.upstream(path, dict(request.headers))
    query = request.url.query
    upstream_request = httpx2.Request(
        request.method,
        f"{url}?{query}" if query else url,
        headers=_forward_headers(request),
        content=decision.body if decision.body is not None else raw,
    )
    try:
        upstream = await forwarder.client.send(upstream_request, stream=True)
    except httpx2.HTTPError as e:
        log.warning("upstream unreachable (%s)", type(e).__name__)
        return JSONResponse(
            {"error": {"type": "upstream_unreachable", "message": f"upstream unreachable: {type(e).__name__}"}},
            status_code=502,
            headers={"x-compactor": decision.status},
        )

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        finally:
            await upstream.aclose()

    response = StreamingResponse(relay(), status_code=upstream.status_code)
    response.raw_headers = _response_headers(upstream, decision.status, decision.saved_tokens)
    return response
