"""What a newcomer's mistakes look like on the command line: one line on stderr naming what to
fix, exit status 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from context_compactor.cli import main
from context_compactor.io import TranscriptError, load

EXAMPLE = REPO / "examples" / "agent_session.json"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("context-compactor: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_xyz:fn", "cannot import 'no_such_module_xyz'"),
        ("json:no_such_function", "module 'json' has no 'no_such_function'"),
        ("json:__name__", "is not callable"),
        ("json", "expected module:function"),
    ],
)
def test_a_summarizer_that_cannot_be_imported_is_one_line(
    spec: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["compact", str(EXAMPLE)], ["replay", str(EXAMPLE)]):
        assert main([*command, "--summarizer", spec]) == 2
        assert says in _one_line_error(capsys)


def test_a_broken_toml_config_names_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "broken.toml"
    cfg.write_text("max_context_tokens = \n", encoding="utf-8")
    assert main(["compact", str(EXAMPLE), "--config", str(cfg)]) == 2
    err = _one_line_error(capsys)
    assert str(cfg) in err and "line 1" in err
    cfg.write_text("context_compactor = 3\n", encoding="utf-8")
    assert main(["compact", str(EXAMPLE), "--config", str(cfg)]) == 2
    assert str(cfg) in _one_line_error(capsys)


def test_a_file_that_is_not_utf8_is_a_transcript_error_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "latin1.json"
    bad.write_bytes('[{"role": "user",\n "content": "café"}]'.encode("latin-1"))
    with pytest.raises(TranscriptError) as info:
        load(bad)
    assert info.value.path == str(bad) and info.value.line == 2
    assert str(bad) in str(info.value) and "0xe9" in str(info.value)
    assert main(["stats", str(bad)]) == 2
    assert str(bad) in _one_line_error(capsys)


def test_a_malformed_file_is_named_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "truncated.json"
    bad.write_text('[{"role": "user", "content": "hi"}', encoding="utf-8")
    assert main(["stats", str(bad)]) == 2
    err = _one_line_error(capsys)
    assert f"{bad}: malformed JSON" in err
