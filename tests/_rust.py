"""Building and running the crate's Rust examples from the tests (`cargo` from PATH or ~/.cargo).

The examples are built in the `examples` profile (release without LTO: the same optimised code,
built in a fraction of the time) into the project's own target directory, so a second build is a
no-op; ``CARGO_TARGET_DIR`` is honoured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def cargo() -> str:
    """The cargo executable; fails under CI=true when there is none, skips otherwise."""
    found = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(found).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("cargo not found")
        pytest.skip("cargo not found")
    return found


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")


def example(name: str, profile: str = "examples") -> Path:
    """Build example ``name`` (profile ``examples``, or ``release`` as the extension is built:
    fat LTO, one codegen unit) and return its path."""
    subprocess.run(
        [cargo(), "build", "--quiet", "--profile", profile, "--example", name],
        cwd=REPO,
        check=True,
    )
    return target_dir() / profile / "examples" / name


def run_parity(jobs: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    """Run the Rust API over ``jobs`` (``examples/parity.rs``: the job keys are documented there),
    written as JSON under ``tmp``: one result per job, or ``{"error": text}``."""
    path = tmp / "jobs.json"
    path.write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
    out = subprocess.run([str(example("parity")), str(path)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def assert_same(got: dict[str, Any], want: dict[str, Any], label: str) -> None:
    """The Rust API's result ``got`` has every key of the Python API's ``want``, equal."""
    assert "error" not in got, got
    for key in want:
        assert got[key] == want[key], f"{label}: {key} differs"
