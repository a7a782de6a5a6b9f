"""The proxy's decision for one request: forward it as it is, send a compacted body, or answer
with the provider's own error (no framework here; runs in a worker thread).

Design note — what is never touched. Below the soft threshold the body the client sent is
forwarded byte for byte (``body=None`` below). A Responses request with ``previous_response_id``,
``conversation`` or an ``item_reference`` holds context the proxy cannot see: forwarded as it is,
marked ``passthrough: server-side state``. System prompt and tool definitions are never
rewritten (Invariant 2), so nothing before Anthropic's earliest ``cache_control`` breakpoint on
``system`` or ``tools`` changes; breakpoints inside a replaced span go with it, so the output never
has more than the request had (at most 4). A rewritten body is the request's own JSON object
with only ``messages`` / ``input`` replaced, written compactly; its compacted prefix is the same
remembered objects every time, so it serialises to the same bytes from call to call
(:mod:`.prefixes`).

The LLM summary is opt-in (``--proxy-summarizer NAME``): from the soft threshold a background
job compacts the conversation with it while requests go on as they are; the next request that
begins with what it replaced gets its prefix. At the hard threshold, with no LLM prefix ready,
the rule summary runs before sending (the request must fit now).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from context_compactor.compactor import ContextCompactor
from context_compactor.server import breakpoints
from context_compactor.server.compaction import Compactors
from context_compactor.server.prefixes import Prefix, PrefixMemory, canonical, chain, credential_hash
from context_compactor.server.windows import Windows

__all__ = ["Decision", "Rewriter"]

log = logging.getLogger("context_compactor.server")

#: Header values (``X-Compactor``) for what ran.
PASSTHROUGH = "passthrough"
SERVER_STATE = "passthrough: server-side state"


@dataclass(frozen=True)
class Decision:
    """``body`` to send (``None``: the original bytes), or ``error`` (status, JSON) to answer with."""

    status: str
    body: bytes | None = None
    error: tuple[int, bytes] | None = None
    saved_tokens: int = 0


def _too_long(kind: str, tokens: int, budget: int, window: int) -> tuple[int, bytes]:
    """The provider's own "prompt is too long" error, so the client's recovery path runs."""
    if kind == "anthropic":
        body: dict[str, Any] = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {budget} maximum",
            },
        }
    else:
        body = {
            "error": {
                "message": (
                    f"This model's maximum context length is {window} tokens. However, your messages resulted in "
                    f"{tokens} tokens (leaving {window - budget} for the completion). Please reduce the length of "
                    "the messages. (context-compactor could not make them fit.)"
                ),
                "type": "invalid_request_error",
                "param": "messages" if kind == "openai" else "input",
                "code": "context_length_exceeded",
            }
        }
    return 400, json.dumps(body).encode()


def compactor_failed(kind: str, name: str) -> tuple[int, bytes]:
    """The provider's server-error shape for a compactor failure on a request over the window."""
    text = f"context-compactor failed ({name}) and the request is over the model's window"
    if kind == "anthropic":
        return 502, json.dumps({"type": "error", "error": {"type": "api_error", "message": text}}).encode()
    return 502, json.dumps({"error": {"message": text, "type": "server_error", "code": "compactor_error"}}).encode()


def _has_item_reference(items: Any) -> bool:
    return isinstance(items, list) and any(isinstance(i, dict) and i.get("type") == "item_reference" for i in items)


def _reserve(body: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_output_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


@dataclass
class _Request:
    kind: str
    body: dict[str, Any]
    key: str
    messages: list[Any]
    system: Any
    tools: Any
    window: int
    compactor: ContextCompactor
    overrides: dict[str, Any]
    root: list[Any]
    hashes: list[bytes]
    prefix: Prefix | None = None  # the remembered prefix the body starts with


class Rewriter:
    """Decides per request; remembers compacted prefixes; counts what it did."""

    def __init__(self, compactors: Compactors, windows: Windows, summarizer: str | None = None) -> None:
        self.compactors = compactors
        self.windows = windows
        self.summarizer = summarizer
        self.memory = PrefixMemory()
        self.counts: dict[str, int] = {"passthrough": 0, "compacted": 0, "reused": 0, "too_long": 0, "errors": 0}
        self._lock = threading.Lock()
        self._jobs: set[bytes] = set()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cc-summary") if summarizer else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def _parse(self, kind: str, raw: bytes, headers: Mapping[str, str]) -> _Request | str:
        """The request's parts, or why it is forwarded as it is."""
        try:
            body = json.loads(raw)
        except ValueError:
            return "passthrough: not JSON"
        if not isinstance(body, dict):
            return "passthrough: not a JSON object"
        if kind == "responses":
            if body.get("previous_response_id") or body.get("conversation") or _has_item_reference(body.get("input")):
                return SERVER_STATE
            key, system = "input", body.get("instructions")
        else:
            key, system = "messages", body.get("system") if kind == "anthropic" else None
        messages = body.get(key)
        if not isinstance(messages, list) or not messages:
            return PASSTHROUGH
        window = self.windows.get(body.get("model"))
        if window is None:
            return "passthrough: unknown model (see --models)"
        reserve = _reserve(body)
        if reserve is not None and reserve >= window:
            return "passthrough: max_tokens fills the window"
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        overrides: dict[str, Any] = {"max_context_tokens": window, "summary_role": "user"}
        if reserve is not None:
            overrides["reserve_tokens"] = reserve
        compactor = self.compactors.get(overrides)
        root = [credential_hash(headers), kind, system, tools]
        return _Request(kind, body, key, messages, system, tools, window, compactor, overrides, root, [])

    def decide(self, kind: str, raw: bytes, headers: Mapping[str, str]) -> Decision:
        """What to do with one request to a compacting route (``kind``: openai, anthropic, responses)."""
        parsed = self._parse(kind, raw, headers)
        if isinstance(parsed, str):
            self._count("passthrough")
            return Decision(parsed)
        r = parsed
        fmt = "openai" if kind == "openai" else kind
        try:
            # Under the soft threshold as it is: forwarded as it is, without hashing anything (a
            # conversation with a remembered prefix is over it: its history only grew since).
            check = r.compactor.check(r.messages, system=r.system, tools=r.tools, format=fmt)
            if check.urgency == "none":
                self._count("passthrough")
                return Decision(PASSTHROUGH)
            r.hashes = chain(r.root, r.messages)
            hit = self.memory.find(r.hashes)
            work = [*hit.messages, *r.messages[hit.covers :]] if hit else r.messages
            r.prefix = hit
            if hit is not None:
                check = r.compactor.check(work, system=r.system, tools=r.tools, format=fmt)
        except Exception as e:  # the provider judges a request the library cannot read
            return self._failed(r, e, None)
        if check.urgency == "none" or (check.urgency == "soft" and self._background(r, hit, work)):
            if hit is None:
                self._count("passthrough")
                return Decision(PASSTHROUGH)
            self._count("reused")
            return Decision(f"compacted: {hit.source}; prefix reused", self._encode(r, work))
        try:
            result = r.compactor.compact(work, system=r.system, tools=r.tools, format=fmt)
        except Exception as e:
            return self._failed(r, e, check.current_tokens <= check.budget)
        if result.tokens_after > check.budget:
            self._count("too_long")
            return Decision(
                "error: over the window", error=_too_long(kind, result.tokens_after, check.budget, r.window)
            )
        messages = self._remember(r, hit, result.messages, "rule") if result.compacted else list(result.messages)
        self._count("compacted")
        return Decision(
            "compacted: rule", self._encode(r, messages), saved_tokens=result.tokens_before - result.tokens_after
        )

    def _failed(self, r: _Request, e: Exception, fits: bool | None) -> Decision:
        self._count("errors")
        name = type(e).__name__
        log.warning(
            "compaction failed (%s); %s", name, "request forwarded unchanged" if fits is not False else "refused"
        )
        if fits is False:
            return Decision(f"error: {name}", error=compactor_failed(r.kind, name))
        return Decision(f"error: {name}; forwarded unchanged")

    def _remember(self, r: _Request, hit: Prefix | None, out: Sequence[Any], source: str) -> list[Any]:
        """Store the compacted prefix of ``out`` (all but the tail it kept verbatim) and return
        ``out`` with that prefix as the stored objects."""
        base = hit.covers if hit else 0
        tail = r.messages[base:]
        s = 0
        while s < len(tail) and s < len(out) and out[-1 - s] is tail[-1 - s]:
            s += 1
        covers = len(r.messages) - s
        prefix = tuple(out[: len(out) - s])
        if hit is not None and hit.unmarked is not None:  # our earlier breakpoint goes: one at a time
            plain = {id(m): u for m, u in zip(hit.messages, hit.unmarked, strict=True)}
            prefix = tuple(plain.get(id(m), m) for m in prefix)
        unmarked = None
        if r.kind == "anthropic":
            marked = breakpoints.mark_summary(prefix, r.messages)
            if marked is not None:
                prefix, unmarked = tuple(marked), prefix
        size = sum(len(canonical(m)) for m in prefix)
        entry = Prefix(covers, prefix, source, size, unmarked)
        self.memory.put(r.hashes[covers], entry, r.hashes[base] if hit else None)
        r.prefix = entry
        return [*prefix, *r.messages[covers:]]

    def _background(self, r: _Request, hit: Prefix | None, work: list[Any]) -> bool:
        """Start the LLM summary of this conversation in the background (opt-in); whether one runs."""
        if self._pool is None or self.summarizer is None:
            return False
        job = r.hashes[-1]
        with self._lock:
            if job in self._jobs:
                return True
            self._jobs.add(job)
        llm = self.compactors.get(r.overrides, self.summarizer)
        fmt = "openai" if r.kind == "openai" else r.kind

        def run() -> None:
            try:
                result = llm.compact(work, system=r.system, tools=r.tools, format=fmt, force=True)
                if result.compacted and not result.over_budget:
                    self._remember(r, hit, result.messages, "llm" if result.summary_source == "llm" else "rule")
            except Exception as e:
                log.warning("background summary failed (%s)", type(e).__name__)
            finally:
                with self._lock:
                    self._jobs.discard(job)

        self._pool.submit(run)
        return True

    @staticmethod
    def _encode(r: _Request, messages: list[Any]) -> bytes:
        body = dict(r.body)
        body[r.key] = messages
        p = r.prefix
        starts = p is not None and all(a is b for a, b in zip(messages, p.messages, strict=False))
        if p is not None and p.unmarked is not None and starts:
            total = breakpoints.count(r.system) + breakpoints.count(r.tools) + breakpoints.count(messages)
            if total > breakpoints.MAX_BREAKPOINTS:  # the client's own ones come first
                body[r.key] = [*p.unmarked, *messages[len(p.messages) :]]
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
