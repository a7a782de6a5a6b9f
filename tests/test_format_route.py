"""How many files a new wire format touches outside its own, counted from the source and held to
the list in `docs/formats.md` ("Adding a wire format"; the target is at most 6).

A place that must decide something for a new format is one that names every format: in Rust a
`match` on a `Format` (no catch-all arm, `tests/test_import_graph.py`, so every variant is named
and a new one is a compile error there) or a file naming every `Format::` variant; in Python a
module whose string constants (docstrings left out) include every name in `_core.FORMATS` (a
list or a `Literal` of the formats). A place naming only some formats is behaviour one format
has (Anthropic's thinking order, the Chat formats the store keeps), not a list a new format joins.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from context_compactor import _core
from test_import_graph import ROOT, SRC, _drop_cfg_test, _match_arms, _strip_rust

PACKAGE = ROOT / "python" / "context_compactor"
DOC = ROOT / "docs" / "formats.md"


def format_variants() -> list[str]:
    body = re.search(r"pub enum Format \{(.*?)\n\}", (SRC / "message.rs").read_text(encoding="utf-8"), re.S)
    assert body is not None
    return re.findall(r"^\s*(\w+),", _strip_rust(body.group(1)), re.M)


def own_file(path: Path) -> bool:
    """A format's own module: its folder or file under `src/formats/` (`gemini/`, `responses.rs`,
    `anthropic_compaction.rs`: structure, rules, and the reader written once for both APIs), its
    writers (the binding's `python/render/<name>.rs`, the Rust API's
    `src/formats/value/write/<name>.rs`), and the readers of a format not yet read once
    (`python/extract/<name>.rs`, `src/formats/value/read_<name>.rs`). The shared files beside
    them (`formats/mod.rs`, `loc.rs`, `source.rs`, `value/read.rs`, `value/write/mod.rs`, ...) are
    not a format's own: they are scanned like any other."""
    rel = path.relative_to(SRC)
    if rel.parts[0] == "formats":
        if rel.parts[1] == "value":
            if rel.parts[2] == "write":
                return rel.stem in _core.FORMATS
            m = re.fullmatch(r"read_(\w+)", rel.stem)
            return m is not None and m.group(1) in _core.FORMATS
        return rel.parts[1].removesuffix(".rs").split("_")[0] in _core.FORMATS
    if rel.parts[:2] in (("python", "extract"), ("python", "render")):
        return rel.stem in _core.FORMATS
    return False


def rust_places(code: str, variants: list[str]) -> bool:
    """Whether `code` names every variant or matches on a `Format`."""
    if all(re.search(rf"\bFormat::{v}\b", code) for v in variants):
        return True
    for m in re.finditer(r"\bmatch\b[^{;]*\{", code):
        j, depth = m.end(), 1
        while j < len(code) and depth:
            depth += code[j] == "{"
            depth -= code[j] == "}"
            j += 1
        if any("Format::" in a.split(" if ")[0] for a in _match_arms(code[m.end() : j - 1])):
            return True
    return False


def rust_files() -> set[str]:
    variants = format_variants()
    out = set()
    for path in sorted(SRC.rglob("*.rs")):
        if path.name == "tests.rs" or path.stem.endswith("_tests") or own_file(path):
            continue
        if rust_places(_drop_cfg_test(_strip_rust(path.read_text(encoding="utf-8"))), variants):
            out.add(str(path.relative_to(ROOT)))
    return out


def names_every_format(source: str, names: tuple[str, ...]) -> bool:
    """Whether the string constants of `source` (docstrings left out) include every name."""
    tree = ast.parse(source)
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            docs.add(id(body[0].value))
        # A string right after an assignment documents it (the stub's attribute docstrings).
        if isinstance(body, list):
            for prev, stmt in itertools.pairwise(body):
                if isinstance(prev, (ast.Assign, ast.AnnAssign)) and isinstance(stmt, ast.Expr):
                    docs.add(id(stmt.value))
    found = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and n.value in names
    }
    return found == set(names)


def python_files() -> set[str]:
    out = set()
    for path in sorted(PACKAGE.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        if names_every_format(path.read_text(encoding="utf-8"), _core.FORMATS):
            out.add(str(path.relative_to(ROOT)))
    return out


def documented(heading: str = r"Files outside the format's own that change") -> tuple[int, list[str]]:
    """The count and the files of one of the docs' lists: the files outside the format's own
    that change, or the optional ones (a feature the format may offer)."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Adding a wire format") :]
    head = re.search(rf"\*\*{heading}: (\d+)\.\*\*", section)
    assert head is not None
    items = []
    for line in section[head.end() :].splitlines()[1:]:
        if not line.strip():
            if items:
                break
            continue
        m = re.match(r"\d+\. `([^`]+)`", line)
        if m:
            items.append(m.group(1))
    return int(head.group(1)), items


def test_a_new_format_touches_at_most_six_files_outside_its_own() -> None:
    count, files = documented()
    assert count == len(files) <= 6
    for f in files:
        assert (ROOT / f).exists(), f


def test_every_place_that_names_every_format_is_on_the_documented_lists() -> None:
    _, files = documented()
    count, optional = documented(r"Optional, for a feature the format may offer")
    assert count == len(optional)
    # Nothing missing from the lists, and nothing on them that the scan does not find.
    assert rust_files() | python_files() == set(files) | set(optional)


def test_the_python_scan_sees_a_list_of_formats() -> None:
    names = ("openai", "anthropic", "responses", "gemini")
    assert names_every_format('X = ("openai", "anthropic", "responses", "gemini")\n', names)
    assert names_every_format('def f(x):\n    return x in ("openai", "anthropic", "responses", "gemini")\n', names)
    assert not names_every_format('"""openai, anthropic, responses or gemini"""\nX = ("openai",)\n', names)
    assert not names_every_format('def f(x):\n    """"openai" "anthropic" "responses" "gemini"."""\n', names)


def test_the_shared_reader_and_writer_files_are_not_a_formats_own() -> None:
    # They dispatch for every format (a `match` on a `Format` there is a place a new format
    # touches): counting them as a format's own hid two places from the count.
    shared = ("mod.rs", "loc.rs", "source.rs", "value/read.rs", "value/write/mod.rs")
    for path in shared:
        assert not own_file(SRC / "formats" / path), path
    for path in ("gemini/read.rs", "gemini/mod.rs", "openai/read.rs", "responses.rs", "value/write/gemini.rs"):
        assert own_file(SRC / "formats" / path), path


def test_the_rust_scan_sees_a_match_and_a_list() -> None:
    variants = ["OpenAi", "Anthropic"]
    assert rust_places("fn f(x: Format) -> u8 { match x { Format::OpenAi => 1, Format::Anthropic => 2 } }", variants)
    assert rust_places("const A: [Format; 2] = [Format::OpenAi, Format::Anthropic];", variants)
    assert not rust_places("fn f(x: Format) -> bool { x == Format::Anthropic }", variants)
