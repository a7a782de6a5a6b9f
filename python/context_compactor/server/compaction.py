"""Compactors built from a request's config, and results turned into the API's JSON (no framework here).

Design note — what a request may set. A request's ``config`` is laid over the server's and
checked by :meth:`CompactionConfig.from_dict` (unknown or bad values: 400 naming the field), but
two fields are the server operator's alone: ``offload_dir`` (a request must not pick where the
server writes files) and ``log_content`` (what the logs may hold). The summarizer is a *name*
from the allow-list given at start (``--summarizer-endpoint NAME=URL``); a URL in its place is
refused, so a request cannot make the server call an address of its choosing (SSRF).

Compactors are immutable and thread-safe, so one per distinct (config, summarizer) is cached.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from context_compactor.compactor import CompactionCheck, ContextCompactor
from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError
from context_compactor.results import CompactResult
from context_compactor.server.settings import ServerSettings

__all__ = ["REMOVED", "Compactors", "RequestRefused", "check_json", "result_json"]

#: Record actions after which the message is gone from the context (replaced by the summary).
REMOVED = frozenset({"summarized", "truncated", "dropped"})
#: Config fields a request may not set.
_OPERATOR_ONLY = frozenset({"offload_dir", "log_content"})
_CACHE_MAX = 256


class RequestRefused(Exception):
    """A request asked for something the server does not allow (400, with the reason)."""

    def __init__(self, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.kind = kind


class Compactors:
    """A cache of compactors per (config, summarizer name)."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._cache: dict[str, ContextCompactor] = {}
        self._lock = threading.Lock()

    def config(self, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        """The server's config with the request's laid over it (operator-only fields refused)."""
        for key in overrides or {}:
            if key in _OPERATOR_ONLY:
                raise RequestRefused(f"config.{key} is set by the server's operator, not by a request")
        return {**self.settings.config, **(overrides or {})}

    def summarizer(self, name: str | None) -> Any:
        if name is None:
            return None
        if "://" in name or "/" in name:
            raise RequestRefused(
                "summarizer: give the name of an endpoint allow-listed at start (--summarizer-endpoint), never a URL"
            )
        endpoint = self.settings.summarizers.get(name)
        if endpoint is None:
            raise RequestRefused(f"summarizer: {name!r} is not an allow-listed endpoint")
        from context_compactor.summarizers import openai_compatible

        key = os.environ.get(f"CONTEXT_COMPACTOR_KEY_{name.upper()}")
        return openai_compatible(endpoint.base_url, endpoint.model, key, timeout=60)

    def get(self, overrides: Mapping[str, Any] | None = None, summarizer: str | None = None) -> ContextCompactor:
        """The compactor for a request (``ConfigError`` for a bad config)."""
        config = self.config(overrides)
        try:
            cache_key = json.dumps([config, summarizer], sort_keys=True)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"config: not JSON: {e}", "config") from None
        with self._lock:
            hit = self._cache.get(cache_key)
        if hit is not None:
            return hit
        compactor = ContextCompactor(CompactionConfig.from_dict(config), summarizer=self.summarizer(summarizer))
        with self._lock:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[cache_key] = compactor
        return compactor


def check_json(check: CompactionCheck) -> dict[str, Any]:
    """A :class:`CompactionCheck` as the API's ``CheckResponse``."""
    return {
        "should_compact": check.should_compact,
        "urgency": check.urgency,
        "current_tokens": check.current_tokens,
        "threshold": check.threshold,
        "hard_threshold": check.hard_threshold,
        "budget": check.budget,
        "target_tokens": check.target_tokens,
        "usage_ratio": round(check.usage_ratio, 4),
        "message_count": check.message_count,
        "format": check.format,
    }


def result_json(
    result: CompactResult,
    given: Sequence[Any],
    host_ids: Sequence[Any] | None,
    fmt: str,
    out_ids: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """A :class:`CompactResult` as the API's ``CompactResponse``.

    ``host_ids`` maps a record's index (into ``given``) to the host's id; with ``None`` the index
    is the id (a session's row id). ``out_ids`` gives the ids of the output messages when the caller
    knows them (a session); otherwise kept originals are found by identity (the library returns
    them as the same objects)."""

    def host(index: int) -> Any:
        if host_ids is None:
            return index
        return host_ids[index] if 0 <= index < len(host_ids) else None

    if out_ids is None:
        position = {id(m): i for i, m in enumerate(given)}
        out_ids = [host(position[id(m)]) if id(m) in position else None for m in result.messages]
    record = [{"index": e.index, "id": host(e.index), "action": e.action, "detail": e.detail} for e in result.record]
    return {
        "messages": list(result.messages),
        "ids": list(out_ids),
        "system": result.system,
        "summary": result.summary,
        "summary_of": [r["id"] for r in record if r["action"] in REMOVED and r["id"] is not None],
        "compacted": result.compacted,
        "strategy": result.strategy,
        "summary_source": result.summary_source,
        "fallback_reason": result.fallback_reason,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "over_budget": result.over_budget,
        "over_budget_reason": result.over_budget_reason,
        "must_keep_missing": list(result.must_keep_missing),
        "record": record,
        "format": fmt,
    }
