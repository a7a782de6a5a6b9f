"""Anthropic ``cache_control`` breakpoints in a rewritten request.

The provider caches the request's prefix up to each breakpoint and accepts at most 4 of them. The
proxy never rewrites ``system`` or ``tools`` (so nothing before the earliest breakpoint there
changes); breakpoints inside a replaced span go with it. It adds one at the end of the summary it
writes, so the stable part of a compacted conversation (system, tools, task, summary) is cached
even while the client's own last-message breakpoint moves on, unless the request would then
have more than 4: the summary is then sent without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_BREAKPOINTS", "count", "mark_summary"]

MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def count(value: Any) -> int:
    """The ``cache_control`` breakpoints in a request's ``system``, ``tools`` or ``messages``."""
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") else 0
        return own + sum(count(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(count(v) for v in value)
    return 0


def mark_summary(prefix: Sequence[Any], originals: Sequence[Any]) -> list[Any] | None:
    """``prefix`` with a breakpoint on the last block of its last new user message (the summary),
    or ``None`` when there is none to mark."""
    kept = {id(m) for m in originals}
    for i in range(len(prefix) - 1, -1, -1):
        m = prefix[i]
        if id(m) in kept or not isinstance(m, dict) or m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list) and content and isinstance(content[-1], dict):
            blocks = [*content[:-1], dict(content[-1])]
        else:
            return None
        blocks[-1]["cache_control"] = dict(_EPHEMERAL)
        return [*prefix[:i], {**m, "content": blocks}, *prefix[i + 1 :]]
    return None
