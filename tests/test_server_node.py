"""A Node 20 script with only built-ins (``node:test``, ``fetch``) drives ``/v1/compact`` and the
session routes as seed 003's Electron main process would (tests/node/seed003_main_process.mjs)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from _server import TOKEN, running
from conftest import REPO

SCRIPT = REPO / "tests" / "node" / "seed003_main_process.mjs"


def test_the_node_main_process_script_passes() -> None:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed (Node 20+)")
        pytest.skip("node is not installed (Node 20+)")
    with running() as server:
        env = {"PATH": os.environ.get("PATH", ""), "CC_URL": server.url, "CC_TOKEN": TOKEN}
        r = subprocess.run(
            [node, "--test", "--test-reporter=spec", str(SCRIPT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pass 3" in r.stdout and "fail 0" in r.stdout
