"""What a server is started with (no framework import: the CLI builds it before uvicorn loads).

Design note — safe by default. The reports about the best-known proxy in this space (no auth,
``CORS *`` on routes that return cached conversation content, a DNS-rebinding hole) decided the
defaults: bind 127.0.0.1; a token on every route that returns or changes data, generated at start
when none is given; ``Host`` and ``Origin`` checked against allow-lists (a page on another site
that rebinds its name to 127.0.0.1 still sends its own name as ``Host``); no CORS headers unless
origins are configured; a body limit; no message text in logs. ``--no-auth`` is refused on any
address other than loopback.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from context_compactor.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_BODY",
    "TOKEN_ENV",
    "TOKEN_HEADER",
    "ServerSettings",
    "SummarizerEndpoint",
    "is_loopback",
    "parse_endpoint",
]

#: The header that carries the proxy's own token (never ``Authorization``: that is the provider's key).
TOKEN_HEADER = "x-compactor-token"
#: The environment variable read when ``--token`` is not given.
TOKEN_ENV = "CONTEXT_COMPACTOR_TOKEN"
#: Anthropic accepts request bodies up to 32 MB; OpenAI's image inputs are smaller.
DEFAULT_MAX_BODY = 32 * 1024 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class SummarizerEndpoint:
    """An OpenAI-compatible summarizer allow-listed at start; requests name it, never give a URL."""

    name: str
    base_url: str
    model: str

    def __repr__(self) -> str:
        return f"SummarizerEndpoint({self.name!r}, {self.base_url!r}, {self.model!r})"


def parse_endpoint(text: str) -> SummarizerEndpoint:
    """``NAME=URL`` or ``NAME=URL#MODEL`` (the model defaults to NAME)."""
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise ConfigError(f"--summarizer-endpoint: expected NAME=URL[#MODEL], got {text!r}", "summarizer_endpoint")
    url, _, model = url.partition("#")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--summarizer-endpoint {name}: {url!r} is not an http(s) URL", "summarizer_endpoint")
    if parts.username or parts.password:
        raise ConfigError(
            f"--summarizer-endpoint {name}: credentials in the URL; set CONTEXT_COMPACTOR_KEY_{name.upper()}",
            "summarizer_endpoint",
        )
    return SummarizerEndpoint(name, url.rstrip("/"), model or name)


def _default_hosts(host: str) -> tuple[str, ...]:
    if is_loopback(host) or host in ("0.0.0.0", "::"):
        return ("127.0.0.1", "localhost", "[::1]", "::1")
    return (host,)


@dataclass(frozen=True)
class ServerSettings:
    """The server's settings.

    Attributes:
        host: Address to bind (loopback by default).
        port: Port to bind.
        token: The token every data route requires in ``X-Compactor-Token``; ``None`` with
            ``no_auth`` only.
        no_auth: No token (refused unless ``host`` is loopback).
        allowed_hosts: Accepted ``Host`` header names (any port); loopback names by default.
        allowed_origins: Accepted ``Origin`` values besides the server's own; requests without an
            ``Origin`` (Node, SDKs, curl) are not affected.
        cors_origins: Origins that get CORS headers (none by default).
        max_body_bytes: Larger request bodies get 413.
        store: The sessions' store: a SQLite path, ``":memory:"`` or a ``postgresql://`` URL.
        upstream_openai: Where OpenAI-format requests go (``/v1/chat/completions``, ``/v1/responses``, ...).
        upstream_anthropic: Where Anthropic requests go (``/v1/messages``).
        summarizers: The allow-listed summarizer endpoints by name.
        proxy_summarizer: The endpoint the proxy's LLM summary uses (opt-in; the rule summary otherwise).
        models: Context window per model name (overrides and additions to the built-in table).
        log_content: Message text may appear in logs.
        retention_s: Sessions idle longer than this are deleted with their content (``None``: kept).
        config: Compaction settings applied to every request (a request's own ``config`` is laid over them).
    """

    host: str = "127.0.0.1"
    port: int = 8787
    token: str | None = None
    no_auth: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY
    store: str = ":memory:"
    upstream_openai: str = "https://api.openai.com"
    upstream_anthropic: str = "https://api.anthropic.com"
    summarizers: Mapping[str, SummarizerEndpoint] = field(default_factory=dict)
    proxy_summarizer: str | None = None
    models: Mapping[str, int] = field(default_factory=dict)
    log_content: bool = False
    retention_s: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.no_auth and not is_loopback(self.host):
            raise ConfigError(f"--no-auth is only allowed on a loopback address, not {self.host!r}", "no_auth")
        if not self.no_auth and not self.token:
            object.__setattr__(self, "token", os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24))
        if not self.allowed_hosts:
            object.__setattr__(self, "allowed_hosts", _default_hosts(self.host))
        if self.proxy_summarizer is not None and self.proxy_summarizer not in self.summarizers:
            raise ConfigError(
                f"--proxy-summarizer {self.proxy_summarizer!r} is not one of the --summarizer-endpoint names",
                "proxy_summarizer",
            )
        if self.max_body_bytes <= 0:
            raise ConfigError("--max-body: expected a positive number of bytes", "max_body_bytes")
        for name in ("upstream_openai", "upstream_anthropic"):
            object.__setattr__(self, name, getattr(self, name).rstrip("/"))

    def __repr__(self) -> str:  # the token never shows
        return f"ServerSettings(host={self.host!r}, port={self.port}, no_auth={self.no_auth}, store=<set>)"

    @staticmethod
    def load_models(path: str | os.PathLike[str]) -> dict[str, int]:
        """A ``--models`` file: JSON ``{"model-name": window_tokens, ...}``."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0 for k, v in data.items()
        ):
            raise ConfigError(f"--models {path}: expected a JSON object of model name -> window tokens", "models")
        return dict(data)

    @staticmethod
    def endpoints(texts: Sequence[str]) -> dict[str, SummarizerEndpoint]:
        """The ``--summarizer-endpoint`` values by name."""
        out: dict[str, SummarizerEndpoint] = {}
        for t in texts:
            e = parse_endpoint(t)
            out[e.name] = e
        return out
