"""One configuration file configures both APIs: the documents of ``tests/data/configs/`` (TOML and
JSON) give Python the config or the error recorded in ``expected.json``, and the Rust core's test
(``src/config/tests.rs``, ``one_config_file_configures_both_apis``) holds serde's reading of the
same files to the same record. ``expected.json`` was written by the Python checks these rules
replaced (0.2's ``config.py``; the documents with ``target_ratio="auto"``, ``prices`` and
``retry_growth_tokens`` by main's ``config.py`` before those fields moved too), so the move changed no
config and no message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomllib

from context_compactor import CompactionConfig, ConfigError, ContextCompactor, SelectiveRule
from context_compactor.cli.common import read_toml

DIR = Path(__file__).parent / "data" / "configs"
EXPECTED: dict[str, Any] = json.loads((DIR / "expected.json").read_text(encoding="utf-8"))


def _load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def test_every_document_has_a_record() -> None:
    files = sorted(p.name for p in DIR.iterdir() if p.suffix in (".toml", ".json") and p.name != "expected.json")
    assert files == sorted(EXPECTED)
    assert sum("error" in v for v in EXPECTED.values()) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_python_reads_each_document_as_recorded(name: str) -> None:
    want = EXPECTED[name]
    data = _load(DIR / name)
    if "config" in want:
        config = CompactionConfig.from_dict(data)
        assert json.loads(json.dumps(config.to_dict())) == want["config"]  # tuples as lists
        assert CompactionConfig.from_dict(config.to_dict()) == config
        if name.endswith(".toml"):
            assert CompactionConfig.from_dict(read_toml(DIR / name)) == config  # the CLI's reader
        ContextCompactor(config).check([{"role": "user", "content": "你好"}])
    else:
        with pytest.raises(ConfigError) as e:
            CompactionConfig.from_dict(data)
        assert (e.value.field, str(e.value)) == (want["error"]["field"], want["error"]["message"])


def test_the_constructor_and_replace_check_as_from_dict_does() -> None:
    with pytest.raises(ConfigError) as e:
        CompactionConfig(trigger_ratio=1.5)
    assert str(e.value) == EXPECTED["bad_ratio.toml"]["error"]["message"]
    with pytest.raises(ConfigError) as e:
        CompactionConfig().replace(preset="production")  # a preset starts a config, it is not a field
    assert e.value.field == "preset"
    with pytest.raises(ConfigError) as e:
        CompactionConfig(selective_rules=[{"item": "memes", "action": "drop", "priority": 1}])  # type: ignore[list-item]
    assert str(e.value) == EXPECTED["bad_rule.toml"]["error"]["message"]
    rules = CompactionConfig(selective_rules=[{"item": "images", "action": "drop", "priority": 3}])  # type: ignore[list-item]
    assert rules.selective_rules == (SelectiveRule("images", "drop", 3),)


def test_derived_values_come_from_the_core() -> None:
    c = CompactionConfig(max_context_tokens=200_000, keep_recent_messages=10)
    assert (c.reserve, c.budget, c.soft_threshold, c.hard_threshold, c.target_tokens) == (
        8_000,
        192_000,
        153_600,
        192_000,
        96_000,
    )
    assert (c.task_token_limit, c.user_words_token_limit, c.details_token_limit) == (2_000, 2_000, 1_500)
    assert (c.summary_token_limit, c.micro_threshold) == (2_000, 96_000)
    tiny = CompactionConfig(max_context_tokens=1_000)
    assert (tiny.reserve, tiny.budget, tiny.user_words_token_limit, tiny.summary_token_limit) == (250, 750, 2_000, 256)
