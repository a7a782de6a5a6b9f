"""``context-compactor stats`` on real corpus files of every format, each figure a user sees checked
against a count made here straight from the wire shape (not through the library's readers): calls
and results per tool with their tokens, blocks per kind, the preview of every message, CJK text.

OpenAI, Anthropic (a Claude Code session) and Responses (a Codex rollout) go through the command
line on the file, as a user runs it; Gemini contents (the corpus converted by ``tests/_gemini.py``,
as dicts and as ``google.genai`` objects, with and without call ids), LangChain and pydantic-ai messages go
through :func:`context_compactor.cli.stats.collect`, since no file format holds them.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import _gemini
from _messages import get
from conftest import corpus_or_skip
from context_compactor import TokenCounter
from context_compactor.cli import main
from context_compactor.cli.stats import FRAMING, collect
from context_compactor.io import load
from strategies import Case, cases

#: Tokens a tool call adds besides its name and arguments (the counting rule's call framing).
CALL_FRAMING = 3
#: Tokens each message adds for its role and separators (``message_overhead_tokens``).
MESSAGE_FRAMING = 4
#: The preview's width (code points).
WIDTH = 60

OPENAI = "openai/kimi-cli-claude-code__cc_29_77bc73228c_1.json"  # 102 calls of 10 tools, images, Chinese
CLAUDE_CODE = "claude-code/cc_3d_feb22da51f_3.jsonl"  # parallel calls, thinking, Chinese
CODEX = "responses/codex-session-viewer_example.jsonl"  # 246 calls, 143 reasoning items, MCP tools
GEMINI_SOURCES = [OPENAI, "openai/swe-agent__marshmallow-1867__function_calling_replace_from_source.json"]

count = TokenCounter("o200k_base").count


def fold(texts: Iterable[str]) -> str:
    """The preview rule, written out: whitespace runs become one space; over ``WIDTH`` code points
    the line is cut to ``WIDTH - 1`` (trailing space dropped) and ends with ``…``."""
    line = " ".join(" ".join(texts).split())
    return line if len(line) <= WIDTH else line[: WIDTH - 1].rstrip() + "…"


class Truth:
    """What a user should see, counted here: per tool ``[calls, call tokens, results, result
    tokens]`` (``None`` tokens where this count does not know them), blocks per kind, previews."""

    def __init__(self) -> None:
        self.tools: dict[str, list[Any]] = {}
        self.kinds: Counter[str] = Counter()
        self.previews: dict[int, str] = {}
        self.names: dict[str, str] = {}

    def call(self, cid: str | None, name: str, args: str | None) -> None:
        if cid is not None:
            self.names[cid] = name
        row = self.tools.setdefault(name, [0, 0, 0, 0])
        row[0] += 1
        row[1] = None if args is None or row[1] is None else row[1] + CALL_FRAMING + count(name) + count(args)
        self.kinds["tool_call"] += 1

    def result(self, cid: str, text: str | None) -> None:
        row = self.tools.setdefault(self.names[cid], [0, 0, 0, 0])
        row[2] += 1
        row[3] = None if text is None or row[3] is None else row[3] + count(text)
        self.kinds["tool_result"] += 1

    def check(self, report: dict[str, Any]) -> None:
        """``report`` is ``stats --json`` (with ``--top`` at least the message count)."""
        for name, (calls, call_tokens, results, result_tokens) in self.tools.items():
            got = report["by_tool"][name]
            assert (got["calls"], got["results"]) == (calls, results), name
            if call_tokens is not None:
                assert got["call_tokens"] == call_tokens, name
            if result_tokens is not None:
                assert got["result_tokens"] == result_tokens, name
        assert set(report["by_tool"]) == set(self.tools)
        blocks = {k: v["blocks"] for k, v in report["by_kind"].items() if k != FRAMING}
        assert blocks == dict(self.kinds)
        assert report["by_kind"][FRAMING]["tokens"] == MESSAGE_FRAMING * report["messages"]
        previews = {e["index"]: e["preview"] for e in report["largest"]}
        assert len(previews) == report["messages"]
        for i, expected in self.previews.items():
            assert previews[i] == expected, i


def run_stats(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["stats", str(path), "--json", "--tokenizer", "o200k_base", "--top", "100000", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def load_and_run(name: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> tuple[Any, dict[str, Any]]:
    """The corpus file ``name`` as ``io.load`` reads it (in format ``fmt``), and its ``stats --json``."""
    path = corpus_or_skip() / name
    transcript = load(path)
    assert transcript.format == fmt
    return transcript, run_stats(path, capsys)


def totals_add_up(report: dict[str, Any], per_message: list[int]) -> None:
    """Roles and kinds share the messages' total; each message's tokens are ``measure``'s."""
    assert sorted(e["tokens"] for e in report["largest"]) == sorted(per_message)
    messages = sum(per_message)
    assert sum(v["tokens"] for k, v in report["by_role"].items() if k != "system (separate)") == messages
    assert sum(v["tokens"] for v in report["by_kind"].values()) == messages
    assert (
        report["total_tokens"]
        == messages + report["tools_tokens"] + report["by_role"].get("system (separate)", {"tokens": 0})["tokens"]
    )


# -- OpenAI ----------------------------------------------------------------------------------------


def openai_truth(messages: list[dict[str, Any]]) -> Truth:
    t = Truth()
    for i, m in enumerate(messages):
        content = m.get("content")
        if m["role"] == "tool":
            t.result(m["tool_call_id"], content if isinstance(content, str) else None)
            t.previews[i] = fold([content]) if content else "[tool_result]"
            continue
        texts = [content] if isinstance(content, str) else []
        t.kinds["text"] += isinstance(content, str)
        for part in content if isinstance(content, list) else ():
            kind = {"text": "text", "image_url": "image"}[part["type"]]
            t.kinds[kind] += 1
            texts += [part["text"]] if kind == "text" else []
        names = []
        for call in m.get("tool_calls") or ():
            f = call["function"]
            t.call(call["id"], f["name"], f["arguments"])
            names.append(f["name"])
        if names:
            texts.append("→ " + ", ".join(names))
        if any(x.strip() for x in texts):
            t.previews[i] = fold(texts)
    return t


def test_openai_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus_or_skip() / OPENAI
    messages = json.loads(path.read_text(encoding="utf-8"))
    report = run_stats(path, capsys)
    truth = openai_truth(messages)
    truth.check(report)
    assert report["by_tool"]["Read"]["calls"] == 30 and report["by_kind"]["image"]["blocks"] == 3
    totals_add_up(report, list(TokenCounter("o200k_base").count_each(messages).messages))
    # Chinese prose, whole and cut, exactly as the user wrote it.
    previews = {e["index"]: e["preview"] for e in report["largest"]}
    assert previews[59] == "这个问题又出现了"
    long_cjk = [i for i, p in truth.previews.items() if p.endswith("…") and any("\u4e00" <= c <= "\u9fff" for c in p)]
    assert long_cjk and all(len(previews[i]) <= WIDTH for i in long_cjk)


def test_openai_text_report_shows_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus_or_skip() / OPENAI
    assert main(["stats", str(path), "--top", "200"]) == 0
    out = capsys.readouterr().out
    for title in ("by role", "by block kind", "by tool", "largest messages"):
        assert title in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["Read"][0] == "30" and rows["tool_call"][0] == "102" and rows["image"][0] == "3"
    assert any(line.rstrip().endswith("这个问题又出现了") for line in out.splitlines())


# -- Anthropic (a Claude Code session) -------------------------------------------------------------


def anthropic_truth(messages: list[dict[str, Any]]) -> Truth:
    t = Truth()
    for i, m in enumerate(messages):
        content = m["content"]
        if isinstance(content, str):
            t.kinds["text"] += 1
            t.previews[i] = fold([content])
            continue
        prose, names, results, thinking = [], [], [], []
        for b in content:
            kind = b["type"]
            if kind == "text":
                t.kinds["text"] += 1
                prose.append(b["text"])
            elif kind == "thinking":
                t.kinds["thinking"] += 1
                thinking.append(b["thinking"])
            elif kind == "tool_use":
                t.call(b["id"], b["name"], None)  # the input is an object: its JSON text is the library's
                names.append(b["name"])
            elif kind == "tool_result":
                body = b.get("content")
                if isinstance(body, str):
                    t.result(b["tool_use_id"], body)
                    results.append(body)
                else:
                    t.result(b["tool_use_id"], None)
                    results += [p["text"] for p in body or () if p.get("type") == "text"]
            else:
                raise AssertionError(f"{i}: a {kind} block this count does not know")
        if names:
            prose.append("→ " + ", ".join(names))
        for texts in (prose, results, thinking):
            if any(x.strip() for x in texts):
                t.previews[i] = fold(texts)
                break
    return t


def test_claude_code_session(capsys: pytest.CaptureFixture[str]) -> None:
    transcript, report = load_and_run(CLAUDE_CODE, "anthropic", capsys)
    truth = anthropic_truth(transcript.messages)
    truth.check(report)
    # Several results share one user message here: each is counted for the call it answers.
    shared = [m for m in transcript.messages if sum(get(b, "type") == "tool_result" for b in m["content"]) > 1]
    assert shared
    assert report["by_tool"]["Bash"]["calls"] == 17 and "?" not in report["by_tool"]
    counts = TokenCounter("o200k_base").count_each(transcript.messages, system=transcript.system, format="anthropic")
    totals_add_up(report, list(counts.messages))


# -- Responses (a Codex rollout) -------------------------------------------------------------------


def responses_truth(items: list[dict[str, Any]]) -> Truth:
    t = Truth()
    for i, it in enumerate(items):
        kind = it.get("type", "message")
        if kind == "message":
            content = it["content"]
            texts = [content] if isinstance(content, str) else [p["text"] for p in content]
            assert isinstance(content, str) or all(p["type"] in ("input_text", "output_text") for p in content)
            t.kinds["text"] += len(texts)
            t.previews[i] = fold(texts)
        elif kind == "function_call":
            t.call(it["call_id"], it["name"], it["arguments"])
            t.previews[i] = fold(["→ " + it["name"]])
        elif kind == "function_call_output":
            t.result(it["call_id"], it["output"])
            t.previews[i] = fold([it["output"]])
        elif kind == "reasoning":
            t.kinds["reasoning"] += 1
            t.previews[i] = "[reasoning]"  # opaque: its encrypted content is not shown
        else:
            raise AssertionError(f"{i}: a {kind} item this count does not know")
    return t


def test_codex_rollout(capsys: pytest.CaptureFixture[str]) -> None:
    transcript, report = load_and_run(CODEX, "responses", capsys)
    responses_truth(transcript.messages).check(report)
    # The corpus README's own count of this file.
    assert report["by_tool"]["shell"]["calls"] == 196 and report["by_tool"]["update_plan"]["calls"] == 9
    assert report["by_kind"]["reasoning"]["blocks"] == 143
    assert report["by_kind"]["tool_call"]["blocks"] == report["by_kind"]["tool_result"]["blocks"] == 246
    assert {"assistant", "tool", "user"} <= set(report["by_role"])
    counts = TokenCounter("o200k_base").count_each(transcript.messages, system=transcript.system, format="responses")
    totals_add_up(report, list(counts.messages))


# -- Gemini contents and LangChain messages (no file format: the library call) ------------------------


def gemini_truth(contents: list[dict[str, Any]]) -> Truth:
    t = Truth()
    for c in contents:
        for p in c["parts"]:
            if "function_call" in p:
                t.tools.setdefault(p["function_call"]["name"], [0, None, 0, None])[0] += 1
                t.kinds["tool_call"] += 1
            elif "function_response" in p:
                t.tools.setdefault(p["function_response"]["name"], [0, None, 0, None])[2] += 1
                t.kinds["tool_result"] += 1
            else:
                t.kinds["thinking" if p.get("thought") else "text"] += 1
    return t


def as_report(stats: Any) -> dict[str, Any]:
    return json.loads(json.dumps(stats.to_dict()))


@pytest.mark.parametrize("ids", [True, False], ids=["ids", "no-ids"])
@pytest.mark.parametrize("source", GEMINI_SOURCES)
def test_gemini_contents(source: str, ids: bool) -> None:
    path = corpus_or_skip() / source
    openai = json.loads(path.read_text(encoding="utf-8"))
    contents, _ = _gemini.to_gemini(openai, "openai", ids=ids)
    truth = gemini_truth(contents)
    # The same calls as the OpenAI original, tool by tool.
    assert {k: v[0] for k, v in truth.tools.items()} == {k: v[0] for k, v in openai_truth(openai).tools.items()}
    converts: list[Callable[[list[Any]], list[Any]]] = [list]
    if importlib.util.find_spec("google.genai") is not None:
        converts.append(_gemini.as_types)
    for convert in converts:
        messages = convert(contents)
        stats = collect(messages, format="gemini", tokenizer="o200k_base", top=10**6)
        report = as_report(stats)
        previews = {e["index"]: e["preview"] for e in report["largest"]}
        truth.previews = {
            i: fold([p["text"] for p in c["parts"] if "text" in p and not p.get("thought")])
            for i, c in enumerate(contents)
            if any("text" in p for p in c["parts"]) and not any("function_call" in p for p in c["parts"])
        }
        truth.check(report)
        assert stats.format == "gemini" and len(previews) == len(contents)
        counts = TokenCounter("o200k_base").count_each(messages, format="gemini")
        totals_add_up(report, list(counts.messages))


def test_langchain_messages() -> None:
    lc = pytest.importorskip("langchain_core.messages", reason="langchain-core is not installed (an extra)")
    path = corpus_or_skip() / OPENAI
    openai = json.loads(path.read_text(encoding="utf-8"))
    messages = lc.convert_to_messages(openai)
    truth = openai_truth(openai)
    stats = collect(messages, tokenizer="o200k_base", top=10**6)
    got = {k: (u.calls, u.results) for k, u in stats.by_tool.items()}
    assert got == {k: (v[0], v[2]) for k, v in truth.tools.items()}
    assert stats.by_kind["tool_call"][0] == truth.kinds["tool_call"]
    assert len(stats.messages) == len(openai)
    for i, expected in truth.previews.items():
        assert stats.messages[i].preview == expected, i


def test_pydantic_ai_messages() -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (an extra)")
    import _frameworks
    import sweep

    path = corpus_or_skip() / OPENAI
    openai = json.loads(path.read_text(encoding="utf-8"))
    messages = _frameworks.to_pydantic_ai(sweep.Case(path.name, "openai", openai, None, None))
    truth = openai_truth(openai)
    stats = collect(messages, tokenizer="o200k_base")
    assert type(messages[0]).__module__.startswith("pydantic_ai")
    got = {k: (u.calls, u.results) for k, u in stats.by_tool.items()}
    assert got == {k: (v[0], v[2]) for k, v in truth.tools.items()}


# -- the library call ------------------------------------------------------------------------------


def test_collect_on_chinese_text_and_a_bad_message() -> None:
    s = collect([{"role": "user", "content": "列出 src/ 下的文件"}])
    assert s.by_kind["text"][0] == 1 and s.messages[0].preview == "列出 src/ 下的文件"
    from context_compactor.errors import MessageTypeError

    with pytest.raises(MessageTypeError, match=r'message 1, field "content"'):
        collect([{"role": "user", "content": "hi"}, {"role": "user", "content": 5}])


@settings(max_examples=60, deadline=None)
@given(cases(), st.sampled_from(["approx", "o200k_base"]))
def test_every_call_and_result_is_counted_and_blocks_add_up(case: Case, tokenizer: str) -> None:
    """Any OpenAI or Anthropic conversation (dicts and SDK objects, parallel calls, thinking,
    images, a pending last step): each message's tokens are ``measure``'s and its blocks' plus the
    framing; every call of the script is counted under its tool, every answered one's result too."""
    stats = collect(case.messages, format=case.fmt, system=case.system, tools=case.tools, tokenizer=tokenizer)
    counts = TokenCounter(tokenizer).count_each(case.messages, system=case.system, tools=case.tools, format=case.fmt)
    assert [m.tokens for m in stats.messages] == list(counts.messages)
    assert all(m.tokens == MESSAGE_FRAMING + sum(b.tokens for b in m.blocks) for m in stats.messages)
    steps = [s for t in case.script.turns for s in t.steps]
    calls = Counter(c.name for s in steps for c in s.calls)
    answered = calls - Counter(c.name for c in steps[-1].calls) if case.script.pending else calls
    assert {k: u.calls for k, u in stats.by_tool.items() if u.calls} == dict(calls)
    assert {k: u.results for k, u in stats.by_tool.items() if u.results} == dict(answered)
