"""The ``>>>`` examples of the package's docstrings and of ``_core.pyi`` run, and show real output.

Each docstring with examples is one test (``module.Qualified.name``). The names an example takes
as given (``compactor``, ``messages``, ``my_llm``, a ``client`` on a local stub of the OpenAI and
Anthropic APIs) come from tests/_docs_namespace.py, plus everything ``context_compactor``
exports; each docstring starts from a fresh copy. An example that cannot run here says why with
``# doctest: +SKIP`` and a comment; pytest's output lists those by file and line.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib
import pkgutil
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import context_compactor
from _docs_namespace import REPO, namespace, stub_environment

PACKAGE = Path(context_compactor.__file__).parent
if PACKAGE != REPO / "python" / "context_compactor":
    # make test-wheel / test-extra: the examples do not depend on the interpreter; they run once, in `make test`.
    pytest.skip("the docstring examples run against this clone's build (make test)", allow_module_level=True)
STUB = PACKAGE / "_core.pyi"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_tests() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests: list[doctest.DocTest] = []
    names = ["context_compactor"] + [
        m.name for m in pkgutil.walk_packages([str(PACKAGE)], "context_compactor.") if not m.name.endswith("__main__")
    ]
    for name in sorted(names):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            # A module behind an extra whose framework is not installed (on 3.10 several are not).
            if e.name and not e.name.startswith("context_compactor"):
                continue
            raise
        for test in finder.find(module, name):
            # Re-exported objects are found again in the modules that import them: keep their home.
            if test.examples and test.name.startswith(name) and (test.filename or "").endswith(".py"):
                tests.append(test)
    return tests


def _stub_tests() -> list[doctest.DocTest]:
    """The examples of the stub's docstrings (the stub is never imported: parsed)."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    parser = doctest.DocTestParser()
    tests: list[doctest.DocTest] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}.{child.name}"
                doc = ast.get_docstring(child, clean=False)
                if doc and ">>>" in doc:
                    first = child.body[0]
                    test = parser.get_doctest(doc, {}, name, str(STUB), first.lineno - 1)
                    if test.examples:
                        tests.append(test)
                if isinstance(child, ast.ClassDef):
                    visit(child, name)

    visit(tree, "context_compactor._core")
    return tests


TESTS = _module_tests() + _stub_tests()


def _where(test: doctest.DocTest, example: doctest.Example) -> str:
    path = Path(test.filename or "?")
    line = (test.lineno or 0) + example.lineno + 1
    return f"{path.relative_to(PACKAGE.parent.parent) if path.is_absolute() else path}:{line}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with stub_environment(tmp_path_factory.mktemp("doctests")) as server:
        yield server


def _globs(server: Any) -> dict[str, Any]:
    """What every docstring example may take as given, fresh for each docstring."""
    ns = {name: getattr(context_compactor, name) for name in context_compactor.__all__}
    ns.update(namespace())
    # A session holding the example transcript, under its window (a 128k one): nothing compacts
    # until an example asks.
    session = context_compactor.Session(
        context_compactor.ContextCompactor(max_context_tokens=128_000, summarizer=ns["summarize"]), ":memory:"
    )
    session.extend(ns["messages"])
    call = {"id": "call_docs_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'}}
    ns.update(
        session=session,
        assistant_message={"role": "assistant", "content": None, "tool_calls": [call]},
        tool_results=[{"role": "tool", "tool_call_id": "call_docs_1", "content": "1 passed"}],
        base_url=server.url("/v1"),
    )
    with contextlib.suppress(ImportError):
        from _docs_namespace import tool_calling_fake_model

        ns["model"] = tool_calling_fake_model()
    return ns


@pytest.mark.parametrize("test", TESTS, ids=lambda t: t.name)
def test_docstring_examples(
    test: doctest.DocTest, workdir: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each docstring in its own directory (the files its examples write), holding examples/.
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    # Not the module's name: a third-party deprecation that an example shows (a legacy API) is
    # attributed to the example's code, which must not be taken for this package's own warning.
    test.globs = {**_globs(workdir), **test.globs, "__name__": "__doctest__"}
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(test, out=report.append)
    skipped = [e for e in test.examples if e.options.get(doctest.SKIP)]
    if result.failed:
        pytest.fail("".join(report), pytrace=False)
    if skipped and len(skipped) == len(test.examples):
        pytest.skip("not run: " + "; ".join(_where(test, e) for e in skipped))


def test_the_examples_left_out_are_few_and_say_why() -> None:
    examples = [(t, e) for t in TESTS for e in t.examples]
    skipped = [(t, e) for t, e in examples if e.options.get(doctest.SKIP)]
    listing = "\n".join(f"  {_where(t, e)}: {e.source.strip()}" for t, e in skipped)
    print(f"\n{len(examples)} docstring examples, {len(skipped)} not run:\n{listing}")
    assert len(skipped) <= len(examples) // 10, listing
    for t, e in skipped:  # the reason is a comment before the directive: `x()  # needs a key  # doctest: +SKIP`
        assert "#" in re.sub(r"#\s*doctest:.*$", "", e.source, flags=re.M), f"{_where(t, e)}: +SKIP without a reason"
    for t, e in skipped:  # still compiled
        compile(e.source, _where(t, e), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
