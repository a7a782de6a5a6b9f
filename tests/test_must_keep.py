"""Must-keep facts survive a forced compaction at windows of 30% and 128k, counted by the probe of
``tests/_must_keep.py`` (its own regexes: neither the core's scanner nor the eval's reader), with
facts planted in the middle of corpus conversations (an assistant's text and a tool call's
argument values) that no compaction may lose without listing them. ``make must-keep`` runs the
probe over the whole corpus at 30%, 128k and 10%."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from _must_keep import facts_of, measure, request_text, window_of
from context_compactor import ContextCompactor
from context_compactor.io import Transcript, load

FILES = [
    "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json",
    "openai/openhands__multi_swe_bench_ponylang__ponyc-4588.json",
    "claude-code/cc_08_60e52c3d41_2.jsonl",
    "openai/kimi-cli-claude-code__cc_3d_feb22da51f_3.json",
]
TEXT_FACTS = ("src/planted_pkg/q7_module.py", "https://planted.example.org/q7/spec.html", "PlantedQ7Error")
ARG_FACTS = ("/srv/planted/q7/config.toml", "tests/planted_q7/test_probe.py")


def text_of_plant() -> str:
    return f" Planted: see {TEXT_FACTS[0]} and {TEXT_FACTS[1]}; it raised {TEXT_FACTS[2]}."


def _is_call(m: dict[str, Any]) -> bool:
    c = m.get("content")
    return bool(m.get("tool_calls")) or (
        isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in c)
    )


def _plant(t: Transcript) -> Transcript:
    """A copy of ``t`` with TEXT_FACTS appended to an assistant's text and ARG_FACTS added as an
    argument of a tool call, both about halfway through (the part a compaction replaces)."""
    messages = copy.deepcopy(t.messages)
    n = len(messages)
    order = sorted(range(1, n - 2), key=lambda i: abs(i - n // 2))
    text = text_of_plant()
    said = False
    for i in order:
        m = messages[i]
        if m.get("role") != "assistant":
            continue
        if isinstance(m.get("content"), str) and m["content"]:
            m["content"] += text
        elif isinstance(m.get("content"), list) and any(b.get("type") == "text" for b in m["content"]):
            next(b for b in m["content"] if b.get("type") == "text")["text"] += text
        else:
            continue
        said = True
        break
    called = False
    for i in order:
        m = messages[i]
        if m.get("role") != "assistant" or not _is_call(m):
            continue
        if m.get("tool_calls"):
            fn = m["tool_calls"][0]["function"]
            args = json.loads(fn["arguments"] or "{}")
            args["planted_paths"] = list(ARG_FACTS)
            fn["arguments"] = json.dumps(args)
        else:
            block = next(b for b in m["content"] if b.get("type") == "tool_use")
            block["input"] = {**block["input"], "planted_paths": list(ARG_FACTS)}
        called = True
        break
    assert said and called, t.path
    return Transcript(messages=messages, format=t.format, system=t.system, tools=t.tools, source=t.source, path=t.path)


@pytest.mark.parametrize("window", ["30%", "128k"])
@pytest.mark.parametrize("name", FILES)
def test_planted_facts_are_kept_or_listed(corpus_dir: Path, name: str, window: str) -> None:
    t = _plant(load(corpus_dir / name))
    assert set(TEXT_FACTS + ARG_FACTS) <= facts_of(t.messages), "the probe sees what was planted"
    tokens = ContextCompactor().counter.count_each(t.messages, system=t.system, tools=t.tools, format=t.format).total
    r = ContextCompactor(max_context_tokens=window_of(tokens, window)).compact(
        t.messages, system=t.system, tools=t.tools, format=t.format, force=True
    )
    assert r.strategy != "none", r.reason
    out = request_text(r.messages, r.system if r.system is not None else t.system)
    planted = TEXT_FACTS + ARG_FACTS
    planted_messages = [m for m in t.messages if text_of_plant() in json.dumps(m)]
    assert planted_messages and not [m for m in r.messages if any(m is p for p in planted_messages)], (
        "the planted message was replaced (kept messages come back as the same objects)"
    )
    for fact in planted:
        assert fact in out or any(fact in m for m in r.must_keep_missing), (name, window, fact)
    kept = [f for f in planted if f in out]
    assert len(kept) == len(planted), (name, window, sorted(set(planted) - set(kept)), r.must_keep_missing)


@pytest.mark.parametrize("window", ["30%", "128k"])
@pytest.mark.parametrize("name", FILES)
def test_corpus_facts_at_98_percent(corpus_dir: Path, name: str, window: str) -> None:
    row = measure(load(corpus_dir / name), window, name)
    assert not row.silent, row
    assert row.share >= 0.98, row


@pytest.mark.xfail(
    strict=True,
    reason="#23 target not met on this file, and no rendering of the ledger can meet it: at 30% (window "
    "3,921, soft threshold 2,352) the system prompt (1,424), the task (599, under its floor "
    "task_max_tokens=735, never cut) and the last block (69: a call still waiting for its result, "
    "never cut) leave the summary message 260 tokens with no narrative; with its 14 entries (13 "
    "details and the trail line) it would take 303, and even the marker line, the sentinel and every "
    "entry on one line with single spaces (no headers, no bullets) take 278, so the ladder evicts the "
    "3 oldest details (11/14 = 78.6%), each listed in must_keep_missing "
    "(test_ctf_web_at_30_percent_has_no_room checks these figures)",
)
def test_ctf_web_at_30_percent(corpus_dir: Path) -> None:
    row = measure(load(corpus_dir / "openai/swe-agent__ctf_web_i_got_id_demo.json"), "30%")
    assert not row.silent, row
    assert row.share >= 0.98, row


def test_ctf_web_at_30_percent_has_no_room(corpus_dir: Path) -> None:
    """Why the xfail above fails, checked: what the compacted request must keep besides the summary
    message (the system prompt, the task under its floor, the waiting call) leaves the summary less
    room than the smallest text that shows its kept entries and the facts it lost, each whole: the
    marker line and the sentinel, then the entries on one line, one space apart. No format or
    packing of the ledger keeps 14 of 14 there; only a larger window does."""
    t = load(corpus_dir / "openai/swe-agent__ctf_web_i_got_id_demo.json")
    counter = ContextCompactor().counter
    tokens = counter.count_each(t.messages, system=t.system, tools=t.tools, format=t.format).total
    cc = ContextCompactor(max_context_tokens=window_of(tokens, "30%"))
    r = cc.compact(t.messages, system=t.system, tools=t.tools, format=t.format, force=True)
    assert not r.over_budget and r.tokens_after <= cc.config.soft_threshold, r.reason
    marker, sentinel = "[context-compactor summary]", "[context-compactor ledger v1]"
    at = next(i for i, m in enumerate(r.messages) if str(m.get("content", "")).startswith(marker))
    summary = r.messages[at]["content"]
    first, rest = summary.split("\n\n", 1)
    assert rest.startswith(sentinel), "the ladder left the narrative out"
    each = counter.count_each(r.messages, system=r.system, tools=t.tools, format=t.format)
    room = cc.config.soft_threshold - (each.total - each.messages[at])
    assert each.messages[at] <= room
    lost = measure(t, "30%").lost
    assert lost and all(any(f in m for m in r.must_keep_missing) for f in lost), (lost, r.must_keep_missing)
    entries = [line[2:] for line in rest.splitlines() if line.startswith("- ")]
    smallest = {"role": "user", "content": f"{first}\n\n{sentinel}\n" + " ".join(entries + lost)}
    need = counter.count_each([smallest], format=t.format).total
    assert need > room, (need, room)


def test_a_fact_a_longer_entry_shows_is_not_repeated(corpus_dir: Path) -> None:
    """On the CTF transcript at 30% the ledger has no room for every fact: a fact whose text a
    longer one shows as a part (the host of its URLs, ``/cgi-bin/hello.pl`` of its URL, a file of
    the trail line of its path) takes no line of its own, and the room goes to facts of their own
    (11 of the probe's 14 kept, 10 before)."""
    t = load(corpus_dir / "openai/swe-agent__ctf_web_i_got_id_demo.json")
    row = measure(t, "30%")
    assert not row.silent and row.kept >= 11, row
    tokens = ContextCompactor().counter.count_each(t.messages, system=t.system, tools=t.tools, format=t.format).total
    r = ContextCompactor(max_context_tokens=window_of(tokens, "30%")).compact(
        t.messages, system=t.system, tools=t.tools, format=t.format, force=True
    )
    marker = "[context-compactor summary]"
    summary = next(m["content"] for m in r.messages if str(m.get("content", "")).startswith(marker))
    entries = [line[2:] for line in summary.splitlines() if line.startswith("- ")]
    paths = [e.rsplit(": ", 1)[0] for e in entries]
    assert entries and not [(e, p) for e in entries for p in paths if e != p and p.endswith("/" + e)], entries
    assert "http://web.chal.csaw.io:8000/cgi-bin/file.pl" not in entries, entries
    # What an evicted entry showed is listed with it (a lost fact is always listed).
    out = request_text(r.messages, t.system)
    for fact in facts_of(t.messages) - {f for f in facts_of(t.messages) if f in out}:
        assert any(fact in m for m in r.must_keep_missing), fact
