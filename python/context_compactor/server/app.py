"""The ASGI application: the API, the sessions, the proxy and the page behind the security gate."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from context_compactor.errors import (
    ConfigError,
    InvalidConversationError,
    MessageTypeError,
    StoreError,
    SummarizerError,
)
from context_compactor.server import api, page, proxy, sessions
from context_compactor.server.compaction import Compactors, RequestRefused
from context_compactor.server.security import SecurityMiddleware
from context_compactor.server.settings import ServerSettings

__all__ = ["API_VERSION", "create_app", "openapi_text"]

#: The API's version in ``/openapi.json`` (not the package's: the schema changes only with the API).
API_VERSION = "1"

log = logging.getLogger("context_compactor.server")

DESCRIPTION = (
    "Compaction over HTTP for hosts that are not Python (seed 003's `/api/chat/compress` with "
    "`summary_of`), sessions over the stores, and a compacting proxy for OpenAI and Anthropic "
    "clients. Every route but the page's shell requires the `X-Compactor-Token` header."
)


def _error(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status)


def _handlers(app: FastAPI) -> None:
    async def refused(_: Request, e: Exception) -> JSONResponse:
        assert isinstance(e, RequestRefused)
        return _error(400, e.kind, str(e))

    async def config(_: Request, e: Exception) -> JSONResponse:
        assert isinstance(e, ConfigError)
        return _error(400, "config_error", str(e), field=e.field)

    async def messages(_: Request, e: Exception) -> JSONResponse:
        field = getattr(e, "field", None)
        index = getattr(e, "index", None)
        return _error(400, "invalid_messages", str(e), field=field, index=index)

    async def summarizer(_: Request, e: Exception) -> JSONResponse:
        return _error(502, "summarizer_error", str(e))

    async def store(_: Request, e: Exception) -> JSONResponse:
        log.warning("store error: %s", type(e).__name__)
        return _error(503, "store_unavailable", str(e))

    async def not_found(_: Request, e: Exception) -> JSONResponse:
        return _error(404, "not_found", str(e))

    app.add_exception_handler(RequestRefused, refused)
    app.add_exception_handler(ConfigError, config)
    app.add_exception_handler(MessageTypeError, messages)
    app.add_exception_handler(InvalidConversationError, messages)
    app.add_exception_handler(SummarizerError, summarizer)
    app.add_exception_handler(StoreError, store)
    app.add_exception_handler(sessions.NotFound, not_found)


def create_app(settings: ServerSettings | None = None) -> Any:
    """The ASGI application for ``settings`` (wrapped in the security gate).

    Example:
        >>> import uvicorn
        >>> app = create_app(ServerSettings(token="secret"))
        >>> uvicorn.run(app, host="127.0.0.1", port=8787)    # serves until stopped  # doctest: +SKIP
    """
    settings = settings or ServerSettings()
    compactors = Compactors(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.forwarder = proxy.Forwarder(settings, compactors)
        try:
            yield
        finally:
            await app.state.forwarder.aclose()
            app.state.sessions.close()

    app = FastAPI(
        title="context-compactor",
        version=API_VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.compactors = compactors
    app.state.sessions = sessions.Sessions(settings.store, compactors, settings.retention_s)
    _handlers(app)
    app.include_router(api.router)
    app.include_router(sessions.router)
    app.include_router(page.router)
    app.include_router(proxy.router)
    return SecurityMiddleware(app, settings)


def openapi_text() -> str:
    """``/openapi.json`` as committed in ``docs/openapi.json`` (``make openapi`` writes it)."""
    import json

    app = create_app(ServerSettings(token="x")).app
    return json.dumps(app.openapi(), indent=2, ensure_ascii=False) + "\n"
