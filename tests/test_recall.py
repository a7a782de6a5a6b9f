"""The recall tool: every placeholder and summary written with ``recall=True`` names an id that
the handler resolves to the exact original text, on every corpus transcript."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _messages import strings
from conftest import corpus_or_skip
from context_compactor import SUMMARY_MARKER, ConfigError, ContextCompactor, Session
from context_compactor.recall import Recall, definition, is_recall_tool, recall_ids

# A recall reference; inside a JSON string (cut arguments) its quotes are escaped.
REF = re.compile(r'recall\(\\?"([0-9a-f]{12})\\?"\)')


def read_all(recall: Recall, id: str) -> str:
    """The original under ``id``, read page after page through the handler."""
    return _pages(id, lambda start: recall(id, start=start))


def _pages(id: str, page_at: Callable[[int], str]) -> str:
    """Every page from ``page_at(start)``, each header naming where the next one starts."""
    out, start = [], 0
    for _ in range(10_000):
        page = page_at(start)
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
    return (
        [("openai", p) for p in sorted((root / "openai").glob("*.json"))]
        + [("anthropic", p) for p in sorted((root / "claude-code").glob("*.jsonl"))]
        + [("responses", p) for p in sorted((root / "responses").glob("*.jsonl"))]
    )


def load(fmt: str, path: Path) -> tuple[list[Any], Any]:
    if fmt == "openai":
        return json.loads(path.read_text(encoding="utf-8")), None
    from context_compactor.io import load as io_load

    t = io_load(path)
    return t.messages, t.system


def read_through_tool(recall: Recall, id: str) -> str:
    """The original under ``id`` as a model reads it: calls to the MCP-prefixed tool name with JSON
    arguments, page after page, each page's header naming where the next one starts."""
    return _pages(
        id, lambda start: recall.call("mcp__context-compactor__recall", json.dumps({"id": id, "start": start}))
    )


def arguments(value: Any) -> list[Any]:
    """Every call's arguments in the input, parsed: what a cut arguments string stands for."""
    out: list[Any] = []
    if isinstance(value, dict):
        if value.get("type") == "tool_use" and isinstance(value.get("input"), dict):
            out.append(value["input"])
        a = value.get("arguments")
        if isinstance(a, str) and (parsed := json_or_none(a)) is not None:
            out.append(parsed)
        for v in value.values():
            out += arguments(v)
    elif isinstance(value, list):
        for v in value:
            out += arguments(v)
    return out


MEDIA = {"image", "image_url", "input_image", "document", "file", "input_file"}
#: Opaque provider data, not text: thinking signatures, encrypted reasoning.
OPAQUE = {"signature", "encrypted_content"}
#: Responses reasoning items (their summaries): a summary's original renders the messages only.
MEDIA |= {"reasoning"}


def without_media(value: Any) -> Any:
    """``value`` without its image and file parts (no text to read back) and opaque provider data."""
    if isinstance(value, dict):
        return {
            k: without_media(v)
            for k, v in value.items()
            if not (isinstance(v, dict) and v.get("type") in MEDIA) and k not in OPAQUE
        }
    if isinstance(value, list):
        return [without_media(v) for v in value if not (isinstance(v, dict) and v.get("type") in MEDIA)]
    return value


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def reachable(text: str, originals: str) -> bool:
    """``text`` is in ``originals`` as it is, or as a JSON string's body (an Anthropic call's
    argument value, rendered in a summary's original as the call's JSON arguments)."""
    return text in originals or any(json.dumps(text, ensure_ascii=a)[1:-1] in originals for a in (False, True))


# What a user finds in the output: each kind of marker by its pattern, with the id it names.
CLEARED = re.compile(r"\[context-compactor: output of [^\]]*\]")
IMAGE = re.compile(r"\[context-compactor: image removed\]")
CUT_REF = re.compile(r'…\[\d+ chars omitted\]…(?: recall\(\\?"([0-9a-f]{12})\\?"\))?')


@pytest.mark.parametrize("ratio", [0.3, 0.1])
def test_every_marker_names_an_id_that_reads_back_the_input(tmp_path: Path, ratio: float) -> None:
    """Every placeholder, cut and summary in the output (micro, auto and forced compactions at
    windows of 30% and 10% of each corpus transcript) names an id; read through the tool, the
    text is exactly a text of the input; and every input text the output lacks can be read back."""
    kinds = dict.fromkeys(("cleared", "recall_again", "image", "cut", "task_cut", "summary"), 0)
    for fmt, path in corpus():
        messages, system = load(fmt, path)
        texts_in = set(strings(messages) + strings(system) + joined_parts(messages))
        args_in = arguments(messages)
        prose_in = set(strings(without_media(messages)) + strings(system) + joined_parts(without_media(messages)))
        task = strings(task_of(messages))
        before = ContextCompactor().counter.count_messages(messages, system=system)
        d = tmp_path / path.stem
        window = max(4_000, int(before * ratio))
        cc = ContextCompactor(max_context_tokens=window, recall=True, offload_dir=str(d), keep_recent_tool_results=2)
        recall = Recall(d, config=cc.config)
        for result in (
            cc.micro_compact(messages, system=system),
            cc.compact(messages, system=system),
            cc.compact(messages, system=system, force=True),
        ):
            out = texts(result.messages) + texts(result.system)
            for s in out:
                what = f"{path.name} @{ratio}: {s[:160]!r}"
                if s.lstrip().startswith(SUMMARY_MARKER):
                    kinds["summary"] += 1
                    (id,) = REF.findall(s.lstrip().splitlines()[0])
                    assert read_through_tool(recall, id).startswith("["), what  # [role] entries
                    continue
                for m in CLEARED.finditer(s):
                    if m.group(0).endswith("call recall again to read it]"):
                        kinds["recall_again"] += 1  # a recall result is not stored again
                        continue
                    kinds["cleared"] += 1
                    (id,) = REF.findall(m.group(0))
                    assert read_through_tool(recall, id) in texts_in, what
                # An image has no text to read back (see docs/recall.md).
                kinds["image"] += len(IMAGE.findall(s))
                # A cut names its original once, after its first marker (cut arguments have a
                # marker in each long value).
                for k, m in enumerate(CUT_REF.finditer(s)):
                    if k > 0:
                        continue
                    assert m.group(1), what
                    original = read_through_tool(recall, m.group(1))
                    kinds["task_cut" if original in task else "cut"] += 1
                    if original not in texts_in:
                        # Cut arguments: the whole arguments of a call of the input.
                        assert json_or_none(original) in args_in, what
            # Nothing compacted is out of reach: each input text the output lacks is in an original
            # the output names (a summary's replaced messages, a cleared output, a cut text).
            ids = {i for s in out for i in REF.findall(s)}
            read = [read_through_tool(recall, i) for i in sorted(ids)]
            # Cut arguments read back as their JSON text: their values as the input holds them.
            originals = "\n".join(read + [t for o in read for t in strings(json_or_none(o))])
            shown = "\n".join(out + strings(result.messages) + strings(result.system))
            lost = [t for t in prose_in if len(t) > 40 and t not in shown and not reachable(t, originals)]
            assert not lost, f"{path.name} @{ratio} {result.strategy}: {[t[:80] for t in lost[:3]]}"
    print(kinds)
    assert kinds["cleared"] > 50 and kinds["summary"] > 10 and kinds["cut"] > 0, kinds


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


def test_the_shortened_task_names_its_whole_text(tmp_path: Path) -> None:
    # The ladder's task step: alone over the budget, and with a summary (the task cut again after
    # the ledger took its instructions). The cut task names the whole task, read back exactly.
    filler = " ".join(f"Background note {i} about the billing module, 账单模块的历史 {i}." for i in range(90))
    rules = " ".join(f"When you finish step {i}, write a note about module {i}." for i in range(12))
    task = f"Fix the rounding of invoice totals; they are off by a cent. {filler} {rules} {filler} Run the tests."
    runs = [[{"role": "user", "content": task}], [{"role": "user", "content": task}, *agent_run(12)[1:]]]
    for n, msgs in enumerate(runs):
        d = tmp_path / str(n)
        cc = ContextCompactor(max_context_tokens=1_000, reserve_tokens=200, recall=True, offload_dir=str(d))
        r = cc.compact(msgs, force=True)
        assert [e.action for e in r.record if e.index == 0] == ["shortened"]
        kept = next(m["content"] for m in r.messages if m["role"] == "user")
        assert kept.startswith(task[:60]) and CUT_REF.search(kept)
        (id,) = recall_ids(kept)
        assert read_through_tool(Recall(d, config=cc.config), id) == task
