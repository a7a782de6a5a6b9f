"""The Rust API and the Python API give the same compaction of the same messages.

Each corpus transcript is read with ``io.load`` (and the OpenAI ones converted to Gemini
contents too), written as JSON and compacted by the Rust API (``examples/parity.rs``, one run for
every job) and by the Python API on the same dicts, at windows of 10% and 30% of the
conversation, with the rule summary and with a summarizer that always returns one fixed text.
The output messages (as JSON), the system prompt, the summary, the strategy, the record, the
origins and the token counts must be equal.

CI runs the 10% window (every transcript and format, both summarizers: the window where the
ladder goes furthest); ``make rust-parity`` (``RUST_PARITY_FULL=1``) adds the 30% window, the
full grid (about twice the time: 190-260 s under load)."""

from __future__ import annotations

import base64
import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from _gemini import to_gemini
from _rust import assert_same, run_parity
from conftest import claude_code_corpus_files, corpus_or_skip, openai_corpus_files
from context_compactor import ContextCompactor
from context_compactor.io import load

FIXED = "<summary>\n1. Goal: as the user stated it.\n2. Progress: tools ran; results read.\n</summary>"
RATIOS = (0.1, 0.3) if os.environ.get("RUST_PARITY_FULL") == "1" else (0.1,)
MIN_WINDOW = 1500


def _plain(v: Any) -> Any:
    """JSON-safe: bytes (a Gemini thought_signature) as base64 text."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _cases() -> list[tuple[str, Path]]:
    responses = (
        sorted((openai_corpus_files()[0].parent.parent / "responses").glob("*.jsonl")) if openai_corpus_files() else []
    )
    files = openai_corpus_files() + claude_code_corpus_files() + responses
    cases = [("as-is", p) for p in files]
    cases += [("gemini", p) for p in openai_corpus_files()]
    return cases


def _conversation(kind: str, path: Path) -> dict[str, Any]:
    t = load(path)
    if kind == "gemini":
        contents, system = to_gemini(t.messages, t.format, t.system)
        return {"messages": _plain(contents), "system": system or None, "tools": None, "format": "gemini"}
    return {
        "messages": _plain(t.messages),
        "system": _plain(t.system),
        "tools": _plain(list(t.tools)) if t.tools else None,
        "format": t.format,
    }


@functools.cache
def _jobs() -> list[dict[str, Any]]:
    jobs = []
    for kind, path in _cases():
        conv = _conversation(kind, path)
        tokens = ContextCompactor().check(conv["messages"], system=conv["system"], tools=conv["tools"]).current_tokens
        for ratio in RATIOS:
            for summary in (None, FIXED):
                window = max(MIN_WINDOW, int(ratio * tokens))
                jobs.append(
                    {
                        **conv,
                        "max_context_tokens": window,
                        "summary": summary,
                        "id": f"{kind}:{path.name}:{ratio}:{summary is not None}",
                    }
                )
    return jobs


@functools.cache
def _rust_results(tmp: str) -> list[dict[str, Any]]:
    return run_parity(_jobs(), Path(tmp))


def _python(job: dict[str, Any]) -> dict[str, Any]:
    fixed = job["summary"]
    compactor = ContextCompactor(
        max_context_tokens=job["max_context_tokens"], summarizer=(lambda _r: fixed) if fixed else None
    )
    kw = {"system": job["system"], "tools": job["tools"], "format": job["format"]}
    check = compactor.check(job["messages"], **kw)
    r = compactor.compact(job["messages"], **kw)
    return {
        "check": {"urgency": check.urgency, "current_tokens": check.current_tokens, "format": check.format},
        "messages": json.loads(json.dumps(r.messages)),
        "system": json.loads(json.dumps(r.system)),
        "summary": r.summary,
        "strategy": r.strategy,
        "summary_source": r.summary_source,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "over_budget": r.over_budget,
        "retained_count": r.retained_count,
        "origins": [list(o) for o in r.origins],
        "record": [{"index": e.index, "action": e.action, "detail": e.detail} for e in r.record],
        "repairs": list(r.repairs),
    }


@pytest.fixture(scope="module")
def rust(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    corpus_or_skip()
    return _rust_results(str(tmp_path_factory.mktemp("parity")))


def test_the_jobs_cover_every_format() -> None:
    corpus_or_skip()
    assert {j["format"] for j in _jobs()} == {"openai", "anthropic", "responses", "gemini"}


@pytest.mark.parametrize("index", range(len(_cases()) * len(RATIOS) * 2))
def test_same_compaction(rust: list[dict[str, Any]], index: int) -> None:
    job = _jobs()[index]
    got = rust[index]
    assert_same(got, _python(job), job["id"])
    assert got["strategy"] != "none" or got["tokens_before"] < job["max_context_tokens"], job["id"]
