"""Building and running the crate's Rust examples from the tests (`cargo` from PATH or ~/.cargo).

The examples are built in the `examples` profile (release without LTO: the same optimised code,
built in a fraction of the time) into the project's own target directory, so a second build is a
no-op; ``CARGO_TARGET_DIR`` is honoured."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

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


def example(name: str) -> Path:
    """Build example ``name`` (profile ``examples``) and return its path."""
    subprocess.run(
        [cargo(), "build", "--quiet", "--profile", "examples", "--example", name],
        cwd=REPO,
        check=True,
    )
    return target_dir() / "examples" / "examples" / name
