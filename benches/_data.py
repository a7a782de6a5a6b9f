"""Benchmark inputs built from the shared corpus (`../shared/corpus/openai`, or `$CORPUS_DIR`).

* :func:`corpus` is every OpenAI-format corpus conversation as parsed, :func:`corpus_texts` the
  strings in them (message texts, tool names, tool-call arguments).
* :func:`conversation` is one valid request of exactly ``n`` messages (1k, 10k, 100k): the
  corpus conversations one after another, again and again, as one long agent run. Every copy is
  parsed anew from the file text, so no two messages share a string object (as in a real run,
  where each message was received on its own; shared strings would make hashing and memory look
  cheaper than they are). Tool-call ids get a per-copy suffix so they stay unique, system
  messages after the first are dropped, and calls that never get a result (the corpus's pending
  final calls, and the one invalid file) are removed, so the whole list is valid for the
  provider: `validate_messages` finds nothing (checked by the benchmarks).
* :func:`new_message` is a fresh message to append (a step of the run, never seen before, so a
  cached count cannot serve it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SIZES = (1_000, 10_000, 100_000)


def corpus_dir() -> Path:
    root = Path(os.environ.get("CORPUS_DIR") or REPO.parent / "shared" / "corpus")
    if not (root / "openai").is_dir():
        raise SystemExit(f"corpus not found at {root} (set CORPUS_DIR)")
    return root


@cache
def _files() -> tuple[tuple[str, str], ...]:
    """(name, JSON text) of every OpenAI-format corpus file, sorted by name."""
    return tuple((p.name, p.read_text(encoding="utf-8")) for p in sorted((corpus_dir() / "openai").glob("*.json")))


def corpus() -> dict[str, list[dict[str, Any]]]:
    """Every corpus conversation by file name (fresh objects on each call)."""
    return {name: json.loads(text) for name, text in _files()}


def corpus_texts(conversations: Iterable[list[dict[str, Any]]] | None = None) -> list[str]:
    """Every message text, tool name and tool-call argument string of ``conversations`` (by
    default the OpenAI corpus, :func:`corpus`), in order: the texts the exact counters are
    checked and timed on (``tests/test_exact.py``, ``benches/bench_exact.py``)."""
    texts: list[str] = []
    for messages in corpus().values() if conversations is None else conversations:
        for m in messages:
            content = m.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
            for call in m.get("tool_calls") or []:
                function = call.get("function") or {}
                texts.extend(v for v in (function.get("name"), function.get("arguments")) if isinstance(v, str))
    return texts


def _answered_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation without calls that get no result right after them."""
    out: list[dict[str, Any]] = []
    n = len(messages)
    for i, m in enumerate(messages):
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and calls:
            answered = set()
            j = i + 1
            while j < n and messages[j].get("role") == "tool":
                answered.add(messages[j].get("tool_call_id"))
                j += 1
            kept = [c for c in calls if c.get("id") in answered]
            if len(kept) != len(calls):
                m = {**m, "tool_calls": kept}
                if not kept:
                    del m["tool_calls"]
                    if not m.get("content"):
                        continue
        out.append(m)
    return out


def _copy(k: int) -> list[dict[str, Any]]:
    """Copy `k` of the corpus as one run: fresh objects, ids suffixed, no system messages."""
    out: list[dict[str, Any]] = []
    for _, text in _files():
        for m in _answered_only(json.loads(text)):
            if m.get("role") in ("system", "developer"):
                continue
            for c in m.get("tool_calls") or ():
                c["id"] = f"{c['id']}~{k}"
            if m.get("role") == "tool":
                m["tool_call_id"] = f"{m['tool_call_id']}~{k}"
            out.append(m)
    return out


def conversation(n: int) -> list[dict[str, Any]]:
    """A valid request of exactly `n` messages: a system prompt, then the corpus, repeated."""
    system = next(m for _, text in _files() for m in json.loads(text) if m.get("role") == "system")
    out = [system]
    k = 0
    while len(out) < n:
        out.extend(_copy(k))
        k += 1
    del out[n:]
    # Do not end inside a tool block: drop a trailing call message and its partial results.
    while out[-1].get("role") == "tool" or out[-1].get("tool_calls"):
        out.pop()
    while len(out) < n:
        out.append(new_message(len(out)))
    return out


def new_message(i: int) -> dict[str, Any]:
    """A fresh assistant message of ordinary size (~600 characters), unique to `i`."""
    return {
        "role": "assistant",
        "content": (
            f"Step {i}: the test suite now passes locally. I changed `parse_config` to reject an "
            "empty `max_context_tokens` with a `ConfigError` naming the field, added a regression "
            "test for the trailing-comma case in `tests/test_config.py`, and reran `pytest -q` "
            "(212 passed, 3 skipped in 4.81s). Next I will look at the flaky timeout in "
            "`test_session.py::test_two_processes`: it waits 50 ms for the WAL checkpoint, which "
            "is too short when the machine is loaded. 下一步：检查超时设置。"
        ),
    }


def text_bytes(messages: list[dict[str, Any]]) -> int:
    """UTF-8 bytes of the request as JSON (the input's own size)."""
    return 2 + sum(len(json.dumps(m, ensure_ascii=False).encode("utf-8")) + 2 for m in messages) - 2 * bool(messages)
