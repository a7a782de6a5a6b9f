"""The command line on the shipped example and on every corpus file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, claude_code_corpus_files, corpus_or_skip, openai_corpus_files
from context_compactor import validate_messages
from context_compactor.cli import main
from context_compactor.io import load

EXAMPLE = REPO / "examples" / "agent_session.json"


def test_stats_on_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "by role" in out and "by tool" in out and "largest messages" in out
    assert "read_file" in out and "bash" in out
    assert main(["stats", str(EXAMPLE), "--json", "--tokenizer", "o200k_base"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["messages"] == 40 and report["tokenizer"] == "o200k_base"
    assert report["problems"] == []


def test_compact_on_the_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "compacted.json"
    assert main(["compact", str(EXAMPLE), "--max-tokens", "3000", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "strategy      rule_summary" in text and "valid         yes" in text
    compacted = json.loads(out.read_text(encoding="utf-8"))
    assert validate_messages(compacted) == []
    assert len(compacted) < 40


def test_compact_with_a_summarizer_module_and_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "my_summarizer.py").write_text(
        "def summarize(request):\n    return '<summary>Fixed the tax rounding; tests pass.</summary>'\n",
        encoding="utf-8",
    )
    cfg = tmp_path / "cc.toml"
    cfg.write_text('preset = "development"\nkeep_recent_messages = 2\n', encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        code = main(
            ["compact", str(EXAMPLE), "--config", str(cfg), "--summarizer", "my_summarizer:summarize", "--json"]
        )
    finally:
        sys.path.remove(str(tmp_path))
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["valid"]
    assert report["strategy"] in ("summary", "none", "micro", "selective")


def test_the_reserve_is_the_librarys_rule_unless_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def report(*args: str) -> dict[str, int]:
        assert main(["compact", str(EXAMPLE), "--json", *args]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    r = report("--max-tokens", "8000")  # min(8000, 8000 // 4), as ContextCompactor(max_context_tokens=8000)
    assert (r["reserve_tokens"], r["budget"], r["soft_threshold"]) == (2_000, 6_000, 4_800)
    assert report("--max-tokens", "100000")["reserve_tokens"] == 8_000
    cfg = tmp_path / "cc.toml"
    cfg.write_text("reserve_tokens = 500\n", encoding="utf-8")
    assert report("--max-tokens", "8000", "--config", str(cfg))["budget"] == 7_500
    cfg.write_text('preset = "production"\n', encoding="utf-8")
    assert report("--max-tokens", "30000", "--config", str(cfg))["reserve_tokens"] == 4_000
    cfg.write_text("reserve_tokens = 9000\n", encoding="utf-8")
    assert main(["compact", str(EXAMPLE), "--max-tokens", "8000", "--config", str(cfg)]) == 2
    assert "reserve_tokens" in capsys.readouterr().err


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "content": 5}]', encoding="utf-8")
    assert main(["compact", str(bad)]) == 2
    assert "message 0" in capsys.readouterr().err
    assert main(["compact", str(tmp_path / "missing.json")]) == 2


def test_console_script_runs() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "context_compactor.cli", "compact", str(EXAMPLE), "--max-tokens", "3000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "tokens" in r.stdout


def corpus_files() -> list[Path]:
    return openai_corpus_files() + claude_code_corpus_files()


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_compact_every_corpus_file(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus_or_skip()
    out = tmp_path / "out.json"
    code = main(["compact", str(path), "--max-tokens", "6000", "--out", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["valid"]
    t = load(out)
    assert validate_messages(t.messages, format=t.format, system=t.system) == []
    assert report["tokens_after"] <= report["soft_threshold"] or report["over_budget"]


@pytest.mark.parametrize(
    "args", [["stats"], ["stats", "--json"], ["compact", "--max-tokens", "3000"], ["replay", "--max-tokens", "3000"]]
)
def test_a_closed_pipe_ends_the_command_quietly(args: list[str]) -> None:
    # `context-compactor stats FILE | head -1`: the reader is gone before the output is written.
    # Deterministic: the pipe's read end is closed before the command starts.
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "context_compactor.cli", args[0], str(EXAMPLE), *args[1:]],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert p.stderr == "", p.stderr  # no traceback, no "Exception ignored ... BrokenPipeError"
    assert p.returncode == 141  # as a process ended by SIGPIPE


def test_head_of_stats_prints_no_error() -> None:
    p = subprocess.run(
        f"{sys.executable} -m context_compactor.cli stats {EXAMPLE} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == "" and p.stdout.count("\n") == 1
