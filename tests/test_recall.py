"""The recall tool: every placeholder and summary written with ``recall=True`` names an id that
the handler resolves to the exact original text, on every corpus transcript."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from _messages import strings
from conftest import corpus_or_skip
from context_compactor import SUMMARY_MARKER, ConfigError, ContextCompactor, Session
from context_compactor.recall import Recall, definition, is_recall_tool, recall_ids

REF = re.compile(r'recall\("([0-9a-f]{12})"\)')
PLACEHOLDER = "[context-compactor:"
CUT = re.compile(r"…\[\d+ chars omitted\]…")


def read_all(recall: Recall, id: str) -> str:
    """The original under ``id``, read page after page through the handler."""
    out, start = [], 0
    for _ in range(10_000):
        page = recall(id, start=start)
        head, _, body = page.partition("\n")
        assert head.startswith(f"[recall {id}: characters {start}-"), head
        out.append(body)
        m = re.search(r"start=(\d+)\)\]$", head)
        if m is None:
            assert head.endswith("(end)]"), head
            return "".join(out)
        start = int(m.group(1))
    raise AssertionError("no end")


def texts(value: Any) -> list[str]:
    """Every string of a value; a call's arguments as one JSON text (a cut names its original once,
    after its first marker, whichever value that is in)."""
    if isinstance(value, dict):
        if value.get("type") == "tool_use" and isinstance(value.get("input"), dict):
            return [json.dumps(value["input"], ensure_ascii=False)]
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return strings(value)


def written(value: Any) -> list[str]:
    """The strings of the output that the compactor wrote: placeholders, cuts and summaries."""
    return [s for s in texts(value) if PLACEHOLDER in s or SUMMARY_MARKER in s or CUT.search(s)]


def joined_parts(value: Any) -> list[str]:
    """Anthropic tool results of several text blocks: their texts joined by newlines (what the
    placeholder replaced as one)."""
    out: list[str] = []
    if isinstance(value, dict):
        c = value.get("content")
        if value.get("type") == "tool_result" and isinstance(c, list):
            out.append("\n".join(p["text"] for p in c if isinstance(p, dict) and p.get("type") == "text"))
        for v in value.values():
            out += joined_parts(v)
    elif isinstance(value, list):
        for v in value:
            out += joined_parts(v)
    return out


def task_of(messages: list[Any]) -> Any:
    return next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)


def corpus() -> list[tuple[str, Path]]:
    root = corpus_or_skip()
    return [("openai", p) for p in sorted((root / "openai").glob("*.json"))] + [
        ("anthropic", p) for p in sorted((root / "claude-code").glob("*.jsonl"))
    ]


def load(fmt: str, path: Path) -> tuple[list[Any], Any]:
    if fmt == "openai":
        return json.loads(path.read_text(encoding="utf-8")), None
    from context_compactor.io import load as io_load

    t = io_load(path)
    return t.messages, t.system


def test_every_id_resolves_to_its_original_on_the_corpus(tmp_path: Path) -> None:
    checked = {"placeholders": 0, "summaries": 0, "cuts": 0, "task": 0}
    for fmt, path in corpus():
        messages, system = load(fmt, path)
        before = ContextCompactor().counter.count_messages(messages, system=system)
        window = max(4_000, before * 3 // 10)
        d = tmp_path / path.stem
        cc = ContextCompactor(max_context_tokens=window, recall=True, offload_dir=str(d), keep_recent_tool_results=2)
        for result in (
            cc.micro_compact(messages, system=system),
            cc.compact(messages, system=system),
            cc.compact(messages, system=system, force=True),
        ):
            recall = Recall(d, config=cc.config)
            originals = "\n".join(strings(messages) + strings(system) + joined_parts(messages))
            for s in written(result.messages) + written(result.system):
                ids = REF.findall(s.replace('\\"', '"'))
                what = f"{path.name}: {s[:160]!r}"
                if s.lstrip().startswith(SUMMARY_MARKER):
                    checked["summaries"] += 1
                    assert ids, what
                    assert result.summary is not None
                elif s.startswith(PLACEHOLDER):
                    if "image removed" in s or "call recall again" in s:
                        continue
                    checked["placeholders"] += 1
                    assert len(ids) == 1, what
                    # A cleared output's original is exactly a string of the input.
                    assert read_all(recall, ids[0]) in originals, what
                else:
                    checked["cuts"] += 1
                    if not ids:
                        # Only the task (shortened by the ladder's last step) is cut without an id.
                        assert s in strings(task_of(result.messages)), what
                        checked["task"] += 1
                        continue
                for id in ids:
                    text = recall.lookup(id)
                    assert text is not None, what
                    assert result.recalls[id] == text
                    assert read_all(recall, id) == text
    print(checked)
    assert checked["placeholders"] > 50 and checked["summaries"] > 10, checked


def agent_run(n: int = 24) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing build in /srv/app/main.py"}]
    for i in range(n):
        args = json.dumps({"cmd": f"cat /srv/app/part{i}.py", "note": "很长的说明 " * 300})
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}],
            }
        )
        out = f"part {i}\n" + "".join(f"line {k}: value_{i}_{k} 中文 {k}\n" for k in range(300))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    msgs.append({"role": "user", "content": "go on"})
    return msgs


def test_a_session_keeps_the_originals_and_the_handler_pages_them() -> None:
    msgs = agent_run()
    cc = ContextCompactor(max_context_tokens=40_000, recall=True, keep_recent_tool_results=2)
    with Session(compactor=cc, store=":memory:") as s:
        s.extend(msgs)
        s.prepare()
        context = s.context()
        recall = Recall(s)
        ids = [i for t in strings(context) for i in recall_ids(t)]
        assert ids
        for id in ids:
            text = read_all(recall, id)
            assert text and text == recall.lookup(id)
        # The summary's original holds every replaced message whole.
        summary_id = recall_ids(s.compactions()[-1].summary or "")[0]
        replaced = recall.lookup(summary_id) or ""
        assert all(m["content"] in replaced for m in msgs[2:10:2])
        ids = [summary_id]
        # Each page is bounded: min(2000 tokens, a tenth of the budget).
        page = recall(ids[0])
        assert cc.counter.count(recall.page_text(page)) <= min(2_000, cc.config.budget // 10)
        # grep: the matching lines with their numbers.
        hit = recall(ids[0], pattern=r"line 7\d: value_3_")
        assert "10 lines match" in hit.splitlines()[0] and ": line 70: value_3_70" in hit
        assert recall(ids[0], pattern="value_", count=3).count("\n") == 3
        # The name the model sees, MCP prefix or not, is the one the handler answers.
        for name in ("recall", "mcp__context-compactor__recall", "context-compactor.recall"):
            assert recall.call(name, json.dumps({"id": ids[0]})) == page
        with pytest.raises(ValueError):
            recall.call("bash", {"id": ids[0]})


def test_unknown_ids_and_bad_arguments_give_a_message_the_model_can_act_on(tmp_path: Path) -> None:
    recall = Recall(tmp_path)
    assert 'no original is stored under id "0123456789ab"' in recall("0123456789ab")
    assert "12 hex digits" in recall("../../etc/passwd")
    assert "pass the id" in recall("")
    assert "not JSON" in recall.call("recall", "{")


def test_recall_needs_a_session_or_an_offload_dir() -> None:
    with pytest.raises(ConfigError) as e:
        ContextCompactor(max_context_tokens=40_000, recall=True).compact(agent_run(), force=True)
    assert e.value.field == "recall"
    with pytest.raises(ConfigError):
        ContextCompactor(recall="yes")  # type: ignore[arg-type]


def test_ids_are_deterministic_and_off_by_default(tmp_path: Path) -> None:
    msgs = agent_run()
    a = ContextCompactor(max_context_tokens=40_000, recall=True, offload_dir=str(tmp_path / "a"))
    b = ContextCompactor(max_context_tokens=40_000, recall=True, offload_dir=str(tmp_path / "b"))
    ra, rb = a.compact(msgs), b.compact(msgs)
    assert json.dumps(ra.messages) == json.dumps(rb.messages) and ra.recalls
    off = ContextCompactor(max_context_tokens=40_000).compact(msgs)
    assert not off.recalls and not any(recall_ids(t) for t in strings(off.messages))


def test_a_recall_result_is_not_stored_again(tmp_path: Path) -> None:
    msgs = agent_run()
    # The model called recall early on; its result later goes out of the recent window.
    call = {"id": "r1", "type": "function", "function": {"name": "mcp__cc__recall", "arguments": '{"id": "x"}'}}
    msgs[3:3] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "r1", "content": "[recall x: characters 0-9 of 9 (end)]\n" + "y" * 9000},
    ]
    cc = ContextCompactor(max_context_tokens=40_000, recall=True, offload_dir=str(tmp_path))
    result = cc.micro_compact(msgs)
    cleared = next(m["content"] for m in result.messages if m.get("tool_call_id") == "r1")
    assert "call recall again" in cleared and not recall_ids(cleared)


def test_tool_definitions_per_format() -> None:
    assert definition("openai")["function"]["name"] == "recall"
    assert definition("anthropic")["input_schema"]["required"] == ["id"]
    assert definition("responses")["type"] == "function"
    assert definition("gemini")["name"] == "recall"
    assert is_recall_tool("mcp__context-compactor__recall") and not is_recall_tool("recall_file")
    with pytest.raises(ConfigError):
        definition("bedrock")  # type: ignore[arg-type]
