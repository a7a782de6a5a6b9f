"""`replay`: a transcript through a Session as an agent would, the report, the SVG chart, the command."""

from __future__ import annotations

import io
import json
import sys
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conftest import REPO, claude_code_corpus_files, openai_corpus_files
from context_compactor import ContextCompactor, validate_messages
from context_compactor.cli import main
from context_compactor.io import load
from context_compactor.replay import ReplayReport, render_svg, replay
from context_compactor.session import Session

EXAMPLE = REPO / "examples" / "agent_session.json"
SVG = "{http://www.w3.org/2000/svg}"


def corpus_files() -> list[Path]:
    return openai_corpus_files() + claude_code_corpus_files()


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_replay_over_the_corpus_sends_only_valid_contexts(path: Path, corpus_dir: Path) -> None:
    transcript = load(path)
    compactor = ContextCompactor(max_context_tokens=8000, reserve_tokens=800)
    report = replay(transcript, compactor)
    assert len(report.turns) == sum(1 for m in transcript.messages if m["role"] == "assistant")
    # Every context sent keeps the provider's rules, except where the transcript itself, uncompacted,
    # already fails the same rules at that point (a Claude Code log whose tool loop lost a thinking
    # block: no compaction can add it back, so a micro-compaction there keeps the problem).
    assert [t for t in report.invalid_turns if not t.over_by] == []
    # A context over the window is invalid too: at 8,000 tokens no call of any corpus file is.
    assert report.over_window_turns == []
    assert report.valid == (report.invalid_turns == [])
    for t in report.turns:
        if t.problems:
            own = validate_messages(
                transcript.messages[: t.message_index], format=transcript.format, system=transcript.system
            )
            rules = {p.rsplit("(", 1)[1].rstrip(")") for p in t.problems} - {"over_window"}
            assert {p.rule for p in own} >= rules
    for c in report.compactions:
        assert c.tokens_after < c.tokens_before and 0 <= c.facts_kept <= c.facts_total
    if report.compactions:
        assert report.compaction_ratio is not None and 0 < report.compaction_ratio < 1
    ET.fromstring(render_svg(report))


def test_replay_matches_a_hand_run_session(tmp_path: Path) -> None:
    compactor = ContextCompactor(max_context_tokens=3000, reserve_tokens=300)
    store = tmp_path / "r.db"
    report = replay(EXAMPLE, compactor, store=store, session_id="replayed")
    t = load(EXAMPLE)
    assert report.file == str(EXAMPLE) and report.message_count == len(t.messages)
    assert report.compaction_count >= 2 and report.valid
    # The Session stays in the store: every original, and the same compactions.
    s = Session("replayed", compactor=compactor, store=store)
    assert s.history() == t.messages
    assert [c.id for c in s.compactions()] == [c.record_id for c in report.compactions]
    assert validate_messages(s.context()) == []
    s.close()
    # Prefix stability: every call but those right after a compaction starts with the previous context.
    unstable = [k for k, turn in enumerate(report.turns) if turn.prefix_stable is False]
    assert unstable == [c.turn for c in report.compactions]
    assert report.prefix_stability == pytest.approx((len(report.turns) - 1 - len(unstable)) / (len(report.turns) - 1))
    # Facts: all must-keep facts of the rule summary are kept.
    assert all(c.facts_kept == c.facts_total for c in report.compactions)
    d = report.to_dict()
    json.dumps(d)
    assert d["compaction_count"] == report.compaction_count and d["valid"]


def test_no_compaction_is_fully_stable() -> None:
    report = replay(EXAMPLE, ContextCompactor())
    assert repr(report).startswith("ReplayReport(file=") and "turns=" in repr(report) and len(repr(report)) < 400
    assert report.compactions == [] and report.prefix_stability == 1.0 and report.compaction_ratio is None
    assert report.final_tokens == report.transcript_tokens


def test_svg_is_well_formed_and_marks_each_compaction() -> None:
    report = replay(EXAMPLE, ContextCompactor(max_context_tokens=3000, reserve_tokens=300))
    svg = render_svg(report, title='a <title> & "quotes"')
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}polyline")) == 1
    markers = [c for c in root.findall(f"{SVG}circle") if c.get("class") == "compaction"]
    assert len(markers) == report.compaction_count and all(c.find(f"{SVG}title") is not None for c in markers)
    assert [c for c in root.findall(f"{SVG}circle") if c.get("class") == "over-budget"] == []
    assert "window (budget = hard threshold) 2,700" in "".join(root.itertext())
    assert 'a <title> & "quotes"' in "".join(root.itertext())
    empty = ReplayReport(None, "openai", 0, 0, 0, 100, 200)
    ET.fromstring(render_svg(empty))


@pytest.mark.parametrize("width", [960, 420])
def test_a_long_title_wraps_inside_the_chart_and_ends_with_an_ellipsis(width: int) -> None:
    report = replay(EXAMPLE, ContextCompactor(max_context_tokens=3000, reserve_tokens=300))
    title = "a_very_long_transcript_file_name_" * 4 + ".jsonl: " + "many words of a long title " * 8
    root = ET.fromstring(render_svg(report, title=title, width=width))
    lines = [t.text or "" for t in root.findall(f"{SVG}text") if t.get("class") == "title"]
    assert 1 < len(lines) <= 2 and lines[-1].endswith("…")
    left = 72
    # At 8.6 px a character (above the 8.2 px of DejaVu Sans Bold 14), each line stays inside.
    assert all(left + 8.6 * len(line) <= width - 24 for line in lines), lines
    assert root.find(f"{SVG}title").text == title  # the whole title stays in the SVG's <title>
    # The plot starts below the title's last line.
    top = min(float(x.get("y1", "1e9")) for x in root.findall(f"{SVG}line"))
    assert top > 24 + 18 * (len(lines) - 1)
    short = ET.fromstring(render_svg(report, title="short", width=width))
    assert [t.text for t in short.findall(f"{SVG}text") if t.get("class") == "title"] == ["short"]


def over_window_transcript(tmp_path: Path) -> Path:
    """The example with a system prompt bigger than a 3000-token window's budget (2250): system
    prompts are never changed, so no compaction can make any call fit."""
    messages = load(EXAMPLE).messages
    assert messages[0]["role"] == "system"
    messages[0] = {"role": "system", "content": messages[0]["content"] + " Follow the house rules." * 600}
    path = tmp_path / "big_system.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_calls_over_the_window_are_invalid_reported_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = over_window_transcript(tmp_path)
    report = replay(path, ContextCompactor(max_context_tokens=3000))
    assert report.budget == 2250 and len(report.turns) == 19
    assert report.over_window_turns == report.invalid_turns == report.turns and not report.valid
    for t in report.turns:
        assert t.over_by == t.tokens - 2250 > 0 and t.over_budget  # prepare() said so each time
        assert any(p.endswith("(over_window)") and f"by {t.over_by}" in p for p in t.problems)
    d = report.to_dict()
    assert (d["over_window_count"], d["valid"]) == (19, False)
    assert d["max_over_by"] == max(t.over_by for t in report.turns)

    chart = tmp_path / "over.svg"
    assert main(["replay", str(path), "--max-tokens", "3000", "--chart", str(chart)]) == 1
    out = capsys.readouterr().out
    assert "valid contexts    0/19" in out and "over the window   19 of 19 calls over the budget 2,250" in out
    assert "reserve 750, budget 2,250" in out
    root = ET.parse(chart).getroot()
    rings = [c for c in root.findall(f"{SVG}circle") if c.get("class") == "over-budget"]
    assert len(rings) == 19 and "over the window by" in rings[0].findtext(f"{SVG}title", "")
    assert "window (budget = hard threshold) 2,250" in "".join(root.itertext())
    assert main(["replay", str(path), "--max-tokens", "3000", "--json"]) == 1
    j = json.loads(capsys.readouterr().out)
    assert not j["valid"] and j["over_window_count"] == len(j["over_window_turns"]) == 19
    assert all(t["over_by"] == t["tokens"] - 2250 for t in j["over_window_turns"])
    assert all(t["over_by"] > 0 for t in j["invalid_turns"])


def test_progress_bar_only_on_a_tty() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    replay(EXAMPLE, ContextCompactor(), progress=tty)
    replay(EXAMPLE, ContextCompactor(), progress=pipe)
    assert "replay [" in tty.getvalue() and "40/40" in tty.getvalue()
    assert pipe.getvalue() == ""


def test_cli_replay_on_the_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = tmp_path / "replay.svg"
    assert main(["replay", str(EXAMPLE), "--max-tokens", "3000", "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    assert "tokens before → after" in out and "rule_summary" in out
    assert "cache-prefix" in out and "valid contexts    19/19" in out and "compaction ratio" in out
    ET.parse(chart)
    assert main(["replay", str(EXAMPLE), "--max-tokens", "3000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compaction_count"] == len(report["compactions"]) >= 2 and report["valid"]
    assert report["turns"] == 19 and 0 < report["prefix_stability"] < 1


def test_cli_replay_with_a_summarizer_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "replay_summarizer.py").write_text(
        "def summarize(request):\n    return '<summary>Fixed the tax rounding in /srv/app/billing/tax.py.</summary>'\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        code = main(["replay", str(EXAMPLE), "--max-tokens", "3000", "--summarizer", "replay_summarizer:summarize"])
    finally:
        sys.path.remove(str(tmp_path))
    out = capsys.readouterr().out
    assert code == 0 and " summary " in out


class _Chat(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        reply = {
            "id": "x",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "<summary>Rounding fixed in tax.py.</summary>"},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_cli_replay_with_a_summarizer_url(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("context_compactor.summarizers")
    server = HTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("REPLAY_TEST_KEY", "sk-local")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        code = main(
            [
                "replay",
                str(EXAMPLE),
                "--max-tokens",
                "3000",
                "--summarizer-url",
                url,
                "--model",
                "local",
                "--api-key-env",
                "REPLAY_TEST_KEY",
                "--json",
            ]
        )
    finally:
        server.shutdown()
        server.server_close()
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["valid"]
    assert any(c["strategy"] == "summary" for c in report["compactions"])
    assert _Chat.requests and _Chat.requests[0]["path"] == "/v1/chat/completions"
    assert _Chat.requests[0]["body"]["model"] == "local" and _Chat.requests[0]["auth"] == "Bearer sk-local"


def test_cli_replay_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(EXAMPLE), "--summarizer-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["replay", "/nonexistent/file.json"]) == 2


@pytest.mark.parametrize("path", claude_code_corpus_files(), ids=lambda p: p.name)
def test_claude_code_sessions_replayed_at_30_percent_fit_the_window(path: Path, corpus_dir: Path) -> None:
    # Issue 12's "done when": with the window at 30% of the session's size (the reserve derived from
    # it), no model call is sent over the window, and every context is valid.
    t = load(path)
    size = ContextCompactor().counter.count_messages(t.messages, system=t.system, tools=t.tools, format=t.format)
    report = replay(t, ContextCompactor(max_context_tokens=size * 3 // 10))
    assert [(turn.message_index, turn.tokens, turn.over_by) for turn in report.over_window_turns] == []
    assert report.valid
