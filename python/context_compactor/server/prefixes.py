"""Conversation identity for the proxy: the same compacted prefix on the next request.

Design note — why a hash chain, and why it is scoped by the credential. A client that resends
its whole history each call (every Chat Completions / Messages agent loop) must get the *same*
compacted prefix on its next request, byte for byte, or the provider's prompt cache misses on
every call (the 2-7x cost users reported of a proxy that recomputed it). A remembered compaction
is reused only when the incoming messages begin with exactly the messages it replaced:

* ``root = sha256(credential hash, format, model family, system, tools)``;
  ``h[i+1] = sha256(h[i], canonical JSON of message i)``: sorted keys, no spaces, so two
  serialisations of the same message hash alike and any change to any byte of meaning does not.
* A stored entry maps ``h[j]`` (the chain after the first ``j`` messages) to the prefix ``P``
  that replaces them; a request whose chain contains ``h[j]`` is sent as ``P + messages[j:]``.
  The longest match wins; otherwise the compaction is computed afresh (the library's snapshot +
  delta apply: a compaction computed on the first ``j`` messages applies over the rest verbatim).
* The credential hash (of ``Authorization`` / ``x-api-key``) is in the root, so two clients with
  the same system prompt and first messages never see each other's summaries, and a key is never
  kept: only its SHA-256.

Entries live in memory (LRU, bounded by count and by their size in bytes); a restart costs one
recomputation per conversation.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Prefix", "PrefixMemory", "canonical", "chain", "credential_hash"]


def canonical(value: Any) -> bytes:
    """The canonical bytes of a JSON value (sorted keys, compact, UTF-8)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def credential_hash(headers: Any) -> str:
    """A hash of the client's provider credential (never the credential itself)."""
    material = "\n".join(
        str(headers.get(name) or "") for name in ("authorization", "x-api-key", "api-key", "x-goog-api-key")
    )
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def chain(root_parts: Sequence[Any], messages: Sequence[Any]) -> list[bytes]:
    """``[h0, h1, ..., hn]``: the chain after 0, 1, ..., n messages."""
    h = hashlib.sha256(canonical(list(root_parts))).digest()
    out = [h]
    for m in messages:
        h = hashlib.sha256(h + canonical(m)).digest()
        out.append(h)
    return out


@dataclass(frozen=True)
class Prefix:
    """A remembered compaction: ``messages`` replace the first ``covers`` incoming messages."""

    covers: int
    messages: tuple[Any, ...]
    source: str  # "rule" or "llm"
    size: int
    #: ``messages`` without the breakpoint the proxy added (Anthropic), when it added one.
    unmarked: tuple[Any, ...] | None = None


class PrefixMemory:
    """Compacted prefixes by chain hash (thread-safe LRU)."""

    def __init__(self, max_entries: int = 4096, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, Prefix] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, hashes: Sequence[bytes]) -> Prefix | None:
        """The entry of the longest chain prefix that has one (``covers`` tells which)."""
        with self._lock:
            for j in range(len(hashes) - 1, 0, -1):
                hit = self._entries.get(hashes[j])
                if hit is not None and hit.covers == j:
                    self._entries.move_to_end(hashes[j])
                    return hit
        return None

    def put(self, key: bytes, prefix: Prefix, replaces: bytes | None = None) -> None:
        """Remember ``prefix`` under ``key`` (dropping the entry it supersedes)."""
        with self._lock:
            if replaces is not None and replaces != key:
                old = self._entries.pop(replaces, None)
                if old is not None:
                    self._bytes -= old.size
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[key] = prefix
            self._bytes += prefix.size
            while self._entries and (len(self._entries) > self.max_entries or self._bytes > self.max_bytes):
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.size
