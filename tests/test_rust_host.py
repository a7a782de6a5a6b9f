"""A Rust host outside the project runs seed 000's four Tauri commands on the corpus.

A new crate is made with ``cargo new`` in a temporary directory, depends on this one by path
with its default features (no Python), and is ``examples/tauri_commands.rs`` as its ``main.rs``:
the four commands (``compactor_estimate_tokens``, ``compactor_estimate_messages_tokens``,
``compactor_check_threshold``, ``compactor_compact``) run on each corpus transcript (the OpenAI
files as they are, the Claude Code sessions as ``io.load`` reads them) with seed 000's
development config. Their figures must be the Python API's on the same messages, and the
compacted conversation valid, under the soft threshold, with its task. Built offline into
``target/host`` (a second run reuses it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from _rust import REPO, cargo, target_dir
from conftest import claude_code_corpus_files, corpus_or_skip, openai_corpus_files
from context_compactor import (
    CompactionConfig,
    ContextCompactor,
    ConversationState,
    estimate_tokens,
    validate_messages,
)
from context_compactor.io import load

FILES = openai_corpus_files() + claude_code_corpus_files()


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus_or_skip()
    root = tmp_path_factory.mktemp("host")
    subprocess.run([cargo(), "new", "--quiet", "--bin", "--vcs", "none", "seed000-host"], cwd=root, check=True)
    crate = root / "seed000-host"
    manifest = crate / "Cargo.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8")
        + f'context-compactor = {{ path = "{REPO.as_posix()}" }}\nserde = {{ version = "1", features = ["derive"] }}\n'
        + 'serde_json = "1"\n',
        encoding="utf-8",
    )
    shutil.copy(REPO / "examples" / "tauri_commands.rs", crate / "src" / "main.rs")
    target = target_dir() / "host"
    subprocess.run(
        [cargo(), "build", "--quiet", "--offline", "--target-dir", str(target)],
        cwd=crate,
        check=True,
    )
    return target / "debug" / "seed000-host"


def _messages(path: Path) -> list[Any]:
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    return load(path).messages


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_the_four_commands(host: Path, tmp_path: Path, path: Path) -> None:
    messages = _messages(path)
    file = tmp_path / "conversation.json"
    file.write_text(json.dumps(messages), encoding="utf-8")
    out = json.loads(subprocess.run([str(host), str(file)], check=True, capture_output=True, text=True).stdout)

    first = messages[0]["content"] if isinstance(messages[0].get("content"), str) else ""
    assert out["estimate_tokens"] == estimate_tokens(first)
    tokens = ContextCompactor().check(messages).current_tokens
    assert out["estimate_messages_tokens"] == tokens

    config = CompactionConfig.preset("development")
    check = ContextCompactor(config).check(messages)
    assert out["check"] == {
        "should_compact": check.should_compact,
        "current_tokens": check.current_tokens,
        "threshold": 5_000,
        "urgency": check.urgency,
    }

    result = out["compact"]
    compacted = result["compacted_messages"]
    assert result["original_count"] == len(messages)
    assert result["tokens_before_compaction"] == check.current_tokens
    assert result["tokens_after_compaction"] <= 5_000 or tokens < 2_000, result["tokens_after_compaction"]
    assert validate_messages(compacted) == []
    # The same compaction as the Python API's with the same settings (seed 000's development
    # values are the development preset).
    want = ContextCompactor(config).compact(messages, force=True, state=ConversationState())
    assert compacted == json.loads(json.dumps(want.messages))
    assert result["summary"] == (want.summary or "")
    assert result["retained_count"] == want.retained_count
    if want.compacted_count:
        # The memory flush stored the replaced span's user messages.
        replaced = {e.index for e in want.record if e.action == "summarized"}
        said = [
            i for i in replaced if messages[i].get("role") == "user" and isinstance(messages[i].get("content"), str)
        ]
        assert result["flushed_memories"] == len([i for i in said if messages[i]["content"].strip()])
