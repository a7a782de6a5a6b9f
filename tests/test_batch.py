"""compact_many / acompact_many / check_many and the `batch` command, on the real corpus."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _gemini import to_gemini
from _responses import to_responses
from context_compactor import (
    CompactionConfig,
    CompactResult,
    ContextCompactor,
    MessageTypeError,
    SummarizerError,
    validate_messages,
)
from context_compactor.batch import BatchError
from context_compactor.cli import main
from context_compactor.io import Transcript, load, save
from strategies import cases


def _corpus(corpus_dir: Path) -> list[Transcript]:
    return [load(p) for p in sorted(corpus_dir.rglob("*.json*"))]  # every corpus file reads


@pytest.fixture(scope="module")
def transcripts(corpus_dir: Path) -> list[Transcript]:
    return _corpus(corpus_dir)


@pytest.fixture(scope="module")
def small(transcripts: list[Transcript]) -> list[Transcript]:
    """The 12 shortest conversations (2 to 22 summarizer calls each at a 4k window, in chunks)."""
    return sorted(transcripts, key=lambda t: len(json.dumps(t.messages, ensure_ascii=False)))[:12]


def _same(a: CompactResult, b: CompactResult) -> None:
    assert a.messages == b.messages
    assert (a.system, a.summary, a.strategy, a.tokens_before, a.tokens_after) == (
        b.system,
        b.summary,
        b.strategy,
        b.tokens_before,
        b.tokens_after,
    )
    assert (a.record, a.repairs, a.over_budget, a.must_keep) == (b.record, b.repairs, b.over_budget, b.must_keep)


def _loop(c: ContextCompactor, ts: list[Transcript], **kw: Any) -> list[CompactResult]:
    return [c.compact(t.messages, system=t.system, tools=t.tools, format=t.format, **kw) for t in ts]


@pytest.mark.parametrize("window", [4_000, 16_000, 64_000])
def test_compact_many_equals_a_loop_of_compact_on_the_corpus(transcripts: list[Transcript], window: int) -> None:
    c = ContextCompactor(max_context_tokens=window)
    before = copy.deepcopy([t.messages for t in transcripts])
    many = c.compact_many(transcripts)
    assert [t.messages for t in transcripts] == before  # inputs untouched
    assert len(many) == len(transcripts)
    for a, b, t in zip(many, _loop(c, transcripts), transcripts, strict=True):
        _same(a, b)
        assert not validate_messages(a.messages, format=t.format, system=a.system)
    assert any(r.compacted for r in many)


def test_compact_many_takes_lists_mappings_and_transcripts_and_keeps_the_order(transcripts: list[Transcript]) -> None:
    c = ContextCompactor(max_context_tokens=8_000)
    t = next(x for x in transcripts if x.format == "anthropic")
    o = next(x for x in transcripts if x.format == "openai")
    items = [
        {"messages": t.messages, "system": t.system, "tools": t.tools, "format": "anthropic"},
        o.messages,
        t,
    ]
    r = c.compact_many(items)
    _same(r[0], r[2])
    _same(r[1], c.compact(o.messages))
    # Defaults apply to the items that carry nothing.
    forced = c.compact_many([o.messages], force=True)[0]
    _same(forced, c.compact(o.messages, force=True))


def test_a_bad_conversation_is_reported_in_its_place_and_the_others_are_done(transcripts: list[Transcript]) -> None:
    c = ContextCompactor(max_context_tokens=8_000)
    good = transcripts[:3]
    items: list[Any] = [good[0], 42, good[1], [{"role": 7, "content": "x"}], {"no": "messages"}, good[2]]
    r = c.compact_many(items, return_exceptions=True)
    assert [type(x).__name__ for x in r] == [
        "CompactResult",
        "MessageTypeError",
        "CompactResult",
        "MessageTypeError",
        "MessageTypeError",
        "CompactResult",
    ]
    assert "conversation 1" in str(r[1])
    assert r[3].index == 0 and r[3].field == "role"  # the message and field inside conversation 3
    with pytest.raises(BatchError) as info:
        c.compact_many(items)
    assert [i for i, _ in info.value.errors] == [1, 3, 4]
    assert isinstance(info.value.results[0], CompactResult)
    assert "3 of 6 conversations failed" in str(info.value)
    # repair=False: an invalid conversation raises InvalidConversationError in its place.
    strict = ContextCompactor(max_context_tokens=8_000, repair=False)
    bad = [{"role": "tool", "tool_call_id": "nope", "content": "orphan"}, {"role": "user", "content": "hi"}]
    out = strict.compact_many([bad, good[0]], return_exceptions=True, force=True)
    assert type(out[0]).__name__ == "InvalidConversationError" and out[0].problems
    assert isinstance(out[1], CompactResult)


def test_check_many_equals_check(transcripts: list[Transcript]) -> None:
    for c in (ContextCompactor(max_context_tokens=8_000), ContextCompactor(max_context_tokens=8_000, tokenizer=len)):
        checks = c.check_many([*transcripts, 5], return_exceptions=True)
        assert isinstance(checks[-1], MessageTypeError)
        for t, x in zip(transcripts, checks, strict=False):
            assert x == c.check(t.messages, system=t.system, tools=t.tools, format=t.format)


def test_a_callable_tokenizer_plans_one_at_a_time_with_the_same_results(transcripts: list[Transcript]) -> None:
    c = ContextCompactor(max_context_tokens=8_000, tokenizer=lambda s: len(s) // 3)
    ts = transcripts[:6]
    for a, b in zip(c.compact_many(ts), _loop(c, ts), strict=True):
        _same(a, b)


class Gate:
    """A summarizer that records how many calls run at once."""

    def __init__(self, delay: float = 0.02) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = self.calls = 0
        self.delay = delay

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1

    def __call__(self, request: Any) -> str:
        self.enter()
        try:
            time.sleep(self.delay)
            return "摘要 summary of " + str(request.replaced_count) + " messages: " + " ".join(request.must_keep[:3])
        finally:
            self.leave()


def test_sync_summarizer_calls_run_concurrently_up_to_max_concurrency(small: list[Transcript]) -> None:
    gate = Gate()
    c = ContextCompactor(max_context_tokens=4_000, summarizer=gate)
    ts = small
    r = c.compact_many(ts, max_concurrency=3)
    assert gate.calls >= 6
    assert gate.peak == 3
    assert sum(x.summary_source == "llm" for x in r) >= 6
    for a, b in zip(r, _loop(ContextCompactor(max_context_tokens=4_000, summarizer=Gate(0)), ts), strict=True):
        _same(a, b)


def test_async_summarizer_with_acompact_many(small: list[Transcript]) -> None:
    transcripts = small
    gate = Gate()

    async def summarize(request: Any) -> str:
        gate.enter()
        try:
            await asyncio.sleep(0.02)
            return "summary: " + " ".join(request.must_keep[:3])
        finally:
            gate.leave()

    c = ContextCompactor(max_context_tokens=4_000, summarizer=summarize)
    r = asyncio.run(c.acompact_many(transcripts, max_concurrency=4))
    assert gate.peak == 4
    assert any(x.summary_source == "llm" for x in r)

    async def loop() -> list[CompactResult]:
        return [await c.acompact(t.messages, system=t.system, tools=t.tools, format=t.format) for t in transcripts]

    for a, b in zip(r, asyncio.run(loop()), strict=True):
        _same(a, b)
    with pytest.raises(SummarizerError, match="acompact_many"):
        c.compact_many(transcripts)


def test_a_failing_summarizer_fails_only_its_conversation(transcripts: list[Transcript]) -> None:
    class AuthenticationError(Exception):
        pass

    def summarize(request: Any) -> str:
        if request.replaced_count % 2:
            raise AuthenticationError("bad key")  # permanent: raises SummarizerError
        raise TimeoutError("slow")  # transient: the rule summary, fallback_reason set

    c = ContextCompactor(max_context_tokens=4_000, summarizer=summarize)
    r = c.compact_many(transcripts, return_exceptions=True)
    failed = [x for x in r if isinstance(x, BaseException)]
    fell_back = [x for x in r if isinstance(x, CompactResult) and x.fallback_reason]
    assert failed and all(isinstance(x, SummarizerError) for x in failed)
    assert fell_back and all(x.summary_source == "rule" for x in fell_back)


def test_max_concurrency_is_checked() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        ContextCompactor().compact_many([], max_concurrency=0)
    assert ContextCompactor().compact_many([]) == []


@settings(max_examples=10, deadline=None)
@given(st.lists(cases(max_turns=3), min_size=1, max_size=3), st.sampled_from([300, 800, 2_000]))
def test_compact_many_is_compact_for_each(batch: list[Any], window: int) -> None:
    c = ContextCompactor(max_context_tokens=window, reserve_tokens=50, keep_recent_messages=2)
    items = [{"messages": x.messages, "system": x.system, "tools": x.tools, "format": x.fmt} for x in batch]
    many = c.compact_many(items, return_exceptions=True)
    for x, r in zip(batch, many, strict=True):
        try:
            one = c.compact(x.messages, system=x.system, tools=x.tools, format=x.fmt)
        except Exception as e:
            assert type(r) is type(e) and str(r) == str(e)
            continue
        _same(r, one)


def _summarize_module_level(request: Any) -> str:
    return "summary"


def test_config_compactor_and_results_pickle(transcripts: list[Transcript]) -> None:
    config = CompactionConfig(max_context_tokens=8_000, keep_recent_messages=4, tokenizer="o200k_base")
    assert pickle.loads(pickle.dumps(config)) == config
    c = ContextCompactor(config, summarizer=_summarize_module_level)
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.config == config and c2.summarizer is _summarize_module_level
    r = c.compact_many(transcripts[:5])
    assert pickle.loads(pickle.dumps(r)) == r
    for a, b in zip(c2.compact_many(transcripts[:5]), r, strict=True):
        _same(a, b)


# -- the batch command -----------------------------------------------------------------------------


@pytest.fixture()
def folder(corpus_dir: Path, tmp_path: Path) -> Path:
    src = tmp_path / "in"
    shutil.copytree(corpus_dir, src)
    (src / "openai" / "planted_bad.json").write_text('[{"role": "user", "content": "未结束', "utf-8")
    # The CJK conversations as a Gemini request and as a Responses request, read and written back.
    (src / "gemini").mkdir()
    for name in sorted((corpus_dir / "openai").glob("*glaive_toolcall_zh*")):
        chat = json.loads(name.read_text("utf-8"))
        contents, system = to_gemini(chat, "openai")
        save(src / "gemini" / name.name, contents, system={"parts": [{"text": system or "用中文回答。"}]})
        save(src / "responses" / name.name, to_responses(chat), system="用中文回答。", format="responses")
    (src / "notes.txt").write_text("not a transcript", "utf-8")
    return src


def bad_path(folder: Path) -> Path:
    return folder / "openai" / "planted_bad.json"


def _report(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("workers", [1, 2])
def test_batch_command_compacts_a_folder_and_reports_bad_files(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: int
) -> None:
    out = tmp_path / "out"
    status = main(["batch", str(folder), "--out", str(out), "--workers", str(workers), "--max-tokens", "8000"])
    captured = capsys.readouterr()
    lines = _report(captured.out)
    files = sorted(str(p) for p in folder.rglob("*.json*"))
    assert [x["file"] for x in lines] == files  # every file once, in sorted order
    assert status == 1  # some files failed
    bad = next(x for x in lines if x["file"].endswith("planted_bad.json"))
    assert not bad["ok"] and bad["error"]["type"] == "TranscriptError" and "line" in bad["error"]["message"]
    assert [x["file"] for x in lines if not x["ok"]] == [str(bad_path(folder))]  # every other file compacts
    good = [x for x in lines if x["ok"]]
    assert {x["format"] for x in good} == {"openai", "anthropic", "responses", "gemini"}
    for x in good:
        t = load(x["out"])
        assert t.format == x["format"]
        assert Path(x["out"]).relative_to(out)
        assert len(t.messages) == x["messages_after"]
        assert not validate_messages(t.messages, format=t.format, system=t.system)
        assert x["tokens_after"] <= x["tokens_before"] or x["repairs"]  # a repair may add a result
    assert any(x["strategy"] != "none" for x in good)
    assert f"{len(files)}/{len(files)} files" in captured.err  # the progress bar
    assert "failed" in captured.err


def test_batch_command_reports_the_same_with_one_or_two_workers(folder: Path, tmp_path: Path) -> None:
    reports = []
    for w in (1, 2):
        rep = tmp_path / f"r{w}.jsonl"
        main(["batch", str(folder), "--out", str(tmp_path / f"o{w}"), "--workers", str(w), "--report", str(rep)])
        lines = _report(rep.read_text("utf-8"))
        for x in lines:
            x.pop("seconds")
            x.pop("out", None)
        reports.append(lines)
    assert reports[0] == reports[1]
    for p in (tmp_path / "o1").rglob("*.json"):
        assert p.read_bytes() == (tmp_path / "o2" / p.relative_to(tmp_path / "o1")).read_bytes()


def test_batch_command_refuses_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["batch", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["batch", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert main(["batch", str(tmp_path), "--out", str(tmp_path / "o"), "--workers", "0"]) == 2
    # An empty folder: nothing to do, success.
    assert main(["batch", str(tmp_path), "--out", str(tmp_path / "o"), "--no-progress"]) == 0


def test_a_worker_that_dies_fails_only_its_file(corpus_dir: Path, tmp_path: Path) -> None:
    from _batch_summarizer import MARKER

    src = tmp_path / "in"
    src.mkdir()
    chats = sorted((corpus_dir / "openai").glob("*.json"))[:8]
    for i, name in enumerate(chats):
        chat = json.loads(name.read_text("utf-8"))
        if i == 3:  # in the span the summarizer sees
            chat[1]["content"] = f"{MARKER} {chat[1].get('content') or ''}"
        (src / f"{i:02d}.json").write_text(json.dumps(chat, ensure_ascii=False), "utf-8")
    rep = tmp_path / "r.jsonl"
    args = ["batch", str(src), "--out", str(tmp_path / "o"), "--workers", "2", "--report", str(rep), "--force"]
    status = main([*args, "--no-progress", "--summarizer", "_batch_summarizer:die_on_marker"])
    lines = _report(rep.read_text("utf-8"))
    assert status == 1 and [x["file"] for x in lines] == sorted(str(p) for p in src.iterdir())
    assert [(x["file"][-7:], x["error"]["type"]) for x in lines if not x["ok"]] == [("03.json", "WorkerDied")]
    assert all(Path(x["out"]).is_file() for x in lines if x["ok"])  # the others are compacted and written
