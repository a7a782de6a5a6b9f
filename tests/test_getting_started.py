"""The Getting started page, followed in a fresh venv, offline: install, the ten lines, a framework
adapter (pydantic-ai), the CLI.

The page installs from a clone (``pip install .``), which builds the Rust core with maturin in an
isolated build environment fetched from PyPI: no network here. So the install is the same one
offline: the package as this clone built it (``make build``: the compiled ``_core`` next to the
Python sources, with the metadata maturin wrote, extras included) and the framework's
distributions as already installed, each packed into a wheel, then
``pip install --no-index --find-links WHEELS "context-compactor[pydantic-ai]"`` into a new venv, so
pip resolves the extra's dependencies from the package's own metadata. (Building the wheel with
maturin and running the suite against it is ``make test-wheel`` / ``make test-extra``.) Then the
page's blocks run with that venv's interpreter and its ``context-compactor`` script, in a temp
directory holding ``examples/``, and the console output must be the page's.
"""

from __future__ import annotations

import base64
import csv
import doctest
import hashlib
import importlib.metadata as md
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from _docs_examples import REPO, blocks, console_commands

PAGE = REPO / "docs" / "getting-started.md"
EXTRA = "pydantic-ai"
packaging = pytest.importorskip("packaging.requirements", reason="packaging is not installed")
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402


def _needed(extra: str) -> list[md.Distribution]:
    """The installed distributions ``context-compactor[extra]`` needs, itself excluded."""
    seen: dict[str, md.Distribution] = {}
    todo = [Requirement(r) for r in md.requires("context-compactor") or []]
    todo = [r for r in todo if r.marker is not None and r.marker.evaluate({"extra": extra})]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        dist = md.distribution(req.name)
        seen[name] = dist
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return list(seen.values())


def _wheel_name(dist: md.Distribution) -> str:
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    return f"{name}-{dist.version}-{tags[0] if tags else 'py3-none-any'}.whl"


def _write_wheel(path: Path, files: dict[str, bytes], dist_info: str) -> None:
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            writer.writerow([arc, f"sha256={digest}", len(data)])
        writer.writerow([f"{dist_info}/RECORD", "", ""])
        z.writestr(f"{dist_info}/RECORD", record.getvalue())


def _pack_installed(dist: md.Distribution, out: Path) -> None:
    """An installed distribution back into a wheel (its RECORD's files under site-packages)."""
    root = Path(str(dist.locate_file("")))
    files: dict[str, bytes] = {}
    dist_info = ""
    for f in dist.files or []:
        arc = f.as_posix()
        if arc.startswith("..") or "__pycache__" in arc or arc.endswith((".pyc", "/RECORD", "/INSTALLER")):
            continue
        if arc.endswith(".dist-info/METADATA"):
            dist_info = arc.split("/", 1)[0]
        files[arc] = (root / arc).read_bytes()
    _write_wheel(out / _wheel_name(dist), files, dist_info)


def _pack_this_clone(out: Path) -> None:
    """This clone's package, as built (the compiled _core in python/), with maturin's metadata."""
    import context_compactor

    dist = md.distribution("context-compactor")
    pkg = REPO / "python" / "context_compactor"
    if Path(context_compactor.__file__).parent != pkg:  # make test-wheel: the wheel's own install is the test
        pytest.skip("the suite runs against an installed wheel, not this clone's build")
    if not list(pkg.glob("_core*.so")) and not list(pkg.glob("_core*.pyd")):
        pytest.skip("the extension is not built in python/ (make build)")
    dist_info = f"context_compactor-{dist.version}.dist-info"
    files = {
        f"context_compactor/{p.relative_to(pkg).as_posix()}": p.read_bytes()
        for p in sorted(pkg.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    for name in ("METADATA", "entry_points.txt"):
        text = dist.read_text(name)
        if text:
            files[f"{dist_info}/{name}"] = text.encode()
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheel = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}-{tag}-linux_x86_64\n"
    files[f"{dist_info}/WHEEL"] = wheel.encode()
    _write_wheel(out / f"context_compactor-{dist.version}-{tag}-{tag}-linux_x86_64.whl", files, dist_info)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (Python 3.11+)")
    tmp = tmp_path_factory.mktemp("getting-started")
    wheels = tmp / "wheels"
    wheels.mkdir()
    _pack_this_clone(wheels)
    for dist in _needed(EXTRA):
        _pack_installed(dist, wheels)
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    # pip itself from this interpreter (it is not installed into the venv: no network to get it).
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-index", "--find-links",
         str(wheels), f"context-compactor[{EXTRA}]"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return env_dir


def _run(env_dir: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_fresh_venv_has_the_package_from_the_wheel_and_no_other_framework(venv: Path, tmp_path: Path) -> None:
    code = (
        "import context_compactor, sys, importlib.util as u; print(context_compactor._core.__file__);"
        "print([m for m in ('langchain_core', 'agents', 'google.genai') if u.find_spec(m.split('.')[0])])"
    )
    proc = _run(venv, [str(venv / "bin" / "python"), "-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr
    where, others = proc.stdout.splitlines()
    assert where.startswith(str(venv)) and others == "[]", proc.stdout


def test_the_getting_started_page_runs_in_the_fresh_venv(venv: Path, tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    page = blocks(PAGE)
    python = [b for b in page if b.lang == "python"]
    consoles = [b for b in page if b.lang == "console"]
    assert len(python) >= 3 and consoles
    # The page's Python blocks in order in one namespace, as a reader types them; `my_llm` is the
    # reader's model call. `plan`/`client` (bring your own LLM call) need a provider: compiled only.
    script = ["import doctest, sys", "ns = {'my_llm': lambda messages, max_tokens=None: 'The user fixed a test.'}"]
    for b in python:
        if b.is_doctest:
            script.append(
                f"t = doctest.DocTestParser().get_doctest({b.code!r}, ns, {b.where!r}, None, 0)\n"
                "r = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)\n"
                "assert r.run(t, clear_globs=False).failed == 0; ns.update(t.globs)"
            )
        elif "client." in b.code:
            script.append(f"compile({b.code!r}, {b.where!r}, 'exec')")
        else:
            script.append(f"exec(compile({b.code!r}, {b.where!r}, 'exec'), ns)")
    script.append("print('OK', ns['result'].strategy)")
    proc = _run(venv, [str(venv / "bin" / "python"), "-c", "\n".join(script)], tmp_path)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "OK summary", proc.stdout + proc.stderr
    checker = doctest.OutputChecker()
    for block in consoles:
        for cmd, want in console_commands(block.code):
            got = _run(venv, ["bash", "-c", cmd], tmp_path)
            out = got.stdout + got.stderr
            flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
            assert checker.check_output(want, out, flags), textwrap.indent(f"$ {cmd}\n{out}", "  ")
