"""Shared fixtures: the real transcripts in ../shared/corpus and an offline tiktoken."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import _hypothesis_profiles  # noqa: F401  (the derandomized "ci" profile for every test file)

REPO = Path(__file__).resolve().parent.parent


def _corpus_path() -> Path:
    return Path(os.environ.get("CORPUS_DIR") or REPO.parent / "shared" / "corpus")


def corpus_or_skip() -> Path:
    """The corpus directory; fails under CI=true when it is missing, skips otherwise."""
    path = _corpus_path()
    if not (path / "openai").is_dir():
        msg = f"shared corpus not found at {path} (set CORPUS_DIR)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return corpus_or_skip()


def openai_corpus_files() -> list[Path]:
    path = _corpus_path()
    return sorted((path / "openai").glob("*.json"))


def claude_code_corpus_files() -> list[Path]:
    path = _corpus_path()
    return sorted((path / "claude-code").glob("*.jsonl"))


@pytest.fixture(scope="session")
def openai_corpus(corpus_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every OpenAI-format corpus conversation, by file name."""
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((corpus_dir / "openai").glob("*.json"))}


def _rank_bytes(name: str) -> bytes:
    """OpenAI's ``.tiktoken`` rank file for an encoding, rebuilt byte for byte from the rank data the
    package compiles in (``src/tokens/data``), so tiktoken works offline on any machine."""
    spec = importlib.util.spec_from_file_location("_cc_ranks", REPO / "src" / "tokens" / "data" / "ranks.py")
    assert spec is not None and spec.loader is not None
    ranks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ranks)
    return bytes(ranks.tiktoken_file(name))


def _cache_name(name: str) -> str:
    """The file name tiktoken's cache uses for an encoding's rank file (sha1 of its URL)."""
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    return hashlib.sha1(url.encode()).hexdigest()


@pytest.fixture(scope="session")
def tiktoken_encoding(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    """`tiktoken_encoding(name)` → a tiktoken Encoding loaded offline from local rank files."""
    tiktoken = pytest.importorskip("tiktoken")
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ("o200k_base", "cl100k_base"):
        (cache / _cache_name(name)).write_bytes(_rank_bytes(name))
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    loaded: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in loaded:
            if not (cache / _cache_name(name)).exists():
                pytest.skip(f"no local rank file for {name}")
            loaded[name] = tiktoken.get_encoding(name)
        return loaded[name]

    yield get  # type: ignore[misc]
    if old is None:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)
    else:
        os.environ["TIKTOKEN_CACHE_DIR"] = old


# The throwaway PostgreSQL server (tests/_pg_server.py): fixtures postgres_server and postgres_url;
# store_target (tests/_stores.py): each store test once per backend.
from _pg_server import postgres_server, postgres_url  # noqa: E402, F401
from _stores import store_target  # noqa: E402, F401
