"""Every example of the Markdown docs runs (README.md, docs/**/*.md), and what it shows is real.

One test per code block (its id is ``file:line``); the blocks of a page run in order in one
namespace. How each language is run, and how a block is left out with a reason, is in
tests/_docs_examples.py; the names the examples take as given (``my_llm``, ``messages``,
``client``) are in tests/_docs_namespace.py. A block left out shows in pytest's summary as
``SKIPPED [1] ...: docs/x.md:12: not run: <reason>``; at most 10% may be.
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import context_compactor
from _docs_examples import REPO, RUN_LANGS, Block, all_blocks, console_commands
from _docs_namespace import namespace, stub_environment

if Path(context_compactor.__file__).parent != REPO / "python" / "context_compactor":
    # make test-wheel / test-extra: the docs do not depend on the interpreter; they run once, in `make test`.
    pytest.skip("the docs' examples run against this clone's build (make test)", allow_module_level=True)

BLOCKS = all_blocks()
RUNNABLE = [b for b in BLOCKS if b.lang in RUN_LANGS]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
MARK = "<<<context-compactor-docs-command-end>>>"


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The namespaces of the pages, in a temporary working directory with the SDKs on a stub."""
    with stub_environment(tmp_path_factory.mktemp("docs-examples")):
        yield {}


def _run_python(block: Block, ns: dict[str, Any]) -> None:
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, ns))
    else:
        exec(code, ns)


def _run_doctest(block: Block, ns: dict[str, Any]) -> None:
    test = doctest.DocTestParser().get_doctest(block.code, ns, block.where, str(block.path), block.line)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(test, out=report.append, clear_globs=False)
    ns.update(test.globs)
    if result.failed:
        pytest.fail("".join(report), pytrace=False)


def _run_console(block: Block) -> None:
    commands = console_commands(block.code)
    script = "".join(f"{cmd}\n__rc=$?; printf '\\n{MARK}\\n'; (exit $__rc)\n" for cmd, _ in commands)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "100"}
    proc = subprocess.run(  # stderr into stdout: what a reader's terminal shows, in order
        ["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300
    )
    outputs = proc.stdout.split(f"\n{MARK}\n")
    checker = doctest.OutputChecker()
    for (cmd, want), got in zip(commands, outputs, strict=False):
        if not checker.check_output(want, got, FLAGS):
            example = doctest.Example(cmd, want)
            pytest.fail(f"{block.where}: $ {cmd}\n" + checker.output_difference(example, got, FLAGS), pytrace=False)


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.where)
def test_example(block: Block, pages: dict[Path, dict[str, Any]], request: pytest.FixtureRequest) -> None:
    if block.skip:
        if block.lang == "python":  # still compiled: a snippet left out cannot rot into a syntax error
            compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        pytest.skip(f"{block.where}: not run: {block.skip}")
    if block.path.name == "stores.md":  # its PostgreSQL examples run on the tests' own server
        os.environ["DATABASE_URL"] = request.getfixturevalue("postgres_url")
    ns = pages.setdefault(block.path, namespace())
    if block.lang == "console":
        _run_console(block)
    elif block.is_doctest:
        _run_doctest(block, ns)
    else:
        _run_python(block, ns)


SHOWN = {"text", "toml", "json", "jsonl"}  # data shown, not code
# Install commands run by tests/test_getting_started.py (the README's: its first line is the page's).
# The Rust page's blocks are doctests of the crate (src/lib.rs includes docs/rust.md): cargo test.
RUN_ELSEWHERE = {("README.md", "bash"), ("getting-started.md", "bash"), ("rust.md", "rust")}


def test_at_most_a_tenth_of_the_examples_is_not_run() -> None:
    examples = [b for b in BLOCKS if b.lang not in SHOWN]
    skipped = [b for b in examples if b.skip]
    listing = "\n".join(f"  {b.where}: {b.skip}" for b in skipped)
    print(f"\n{len(examples)} examples in the docs, {len(skipped)} not run:\n{listing}")
    assert len(skipped) <= len(examples) // 10, listing


def test_every_example_runs_somewhere_or_says_why_not() -> None:
    """A fence in another language (bash, js, none or a typo) is run by nothing: it needs a reason."""
    silent = [
        b.where
        for b in BLOCKS
        if b.lang not in RUN_LANGS | SHOWN and (b.path.name, b.lang) not in RUN_ELSEWHERE and not b.skip
    ]
    assert silent == [], "mark them <!-- not run: reason --> or make them python/console blocks"


def test_the_readme_ten_lines_are_the_getting_started_ones() -> None:
    """The README's example is not run twice: it must be the Getting started page's, which is."""
    readme = next(b for b in BLOCKS if b.path.name == "README.md" and b.lang == "python")
    guide = [b for b in BLOCKS if b.path.name == "getting-started.md" and b.lang == "python"]
    assert readme.code in [b.code for b in guide]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = next(b for b in BLOCKS if b.path.name == "README.md" and b.lang == "bash")
    commands = [ln for ln in readme.code.splitlines() if ln and not ln.startswith("#")]
    ci = [
        ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if ln and not ln.startswith(("#", "set ", "cd "))
    ]
    assert ci == [commands[-1]] == ["make all"]
