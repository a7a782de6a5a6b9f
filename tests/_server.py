"""Helpers for the server's tests: a running server on 127.0.0.1 and an HTTP client for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="the [server] extra is not installed")

from context_compactor.server.run import BackgroundServer  # noqa: E402
from context_compactor.server.settings import ServerSettings  # noqa: E402

TOKEN = "test-token-123"


@contextmanager
def running(**settings: Any) -> Iterator[BackgroundServer]:
    """A server with ``settings`` (token ``TOKEN`` unless ``no_auth``) on a free port."""
    settings.setdefault("port", 0)
    if not settings.get("no_auth"):
        settings.setdefault("token", TOKEN)
    with BackgroundServer(ServerSettings(**settings)) as server:
        yield server


def client(server: BackgroundServer, token: str | None = TOKEN) -> Any:
    """An httpx2 client for ``server`` sending the token header."""
    headers = {"X-Compactor-Token": token} if token else {}
    return httpx2.Client(base_url=server.url, headers=headers, timeout=60, trust_env=False)
