"""The layout's rules, read from the source. The import graphs have no cycles: the Python
package's modules, the Rust core's modules and the binding's modules (`src/python/`). A cycle is
where a layout stops reading top-down: a module that needs another which needs it back cannot be
understood, tested or moved alone.

The graphs are built from the source, not from a running interpreter (no import side effects):

- Python: `ast`, every `import`/`from ... import` of `context_compactor` modules, to the
  module named (`from a import b` where `b` is a submodule: to `b`; `_core` is the native
  leaf). Top-level imports and function-level (lazy) ones are counted separately: the
  top-level graph must be acyclic (a cycle there is an import-order bug), and so must the
  runtime graph, top-level plus lazy (a lazy import that closes a circle only hides it).
  Imports under `if TYPE_CHECKING:` never run and are left out (an annotation may name a
  module that uses this one); so are modules looked up by name (`importlib`, e.g. a store
  backend), which is how a base module reaches the implementations registered with it.
- Rust: every `crate::`/`super::`/`self::` path (in `use` trees and in expressions) and every
  path through a child module the file declares, outside comments, string literals and
  `#[cfg(test)]` items (a test may use what it tests from anywhere), resolved to the deepest
  module it names; a name a module re-exports (`pub use child::Name`) resolves to where it
  is defined. The core (`src/` but `src/python/`) and the binding (`src/python/`) are checked
  separately; the binding may use the core, never the reverse (checked too). `mod x;` is not
  an edge (a parent declaring a child is containment, not use), and neither is a module's use
  of its own folder's `mod.rs` (the folder's shared vocabulary): a cycle is between siblings
  or across folders.

And no `match` on a `Format` has a catch-all arm, so a new variant is a compile error wherever
a format is decided (`docs/formats.md`, "Adding a wire format").
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "context_compactor"
SRC = ROOT / "src"


# ---------------------------------------------------------------- graph helpers


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# ---------------------------------------------------------------- Python


def python_modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    # The native module: a leaf (its stub stands for it), not a name of the package.
    for stub in PACKAGE.rglob("*.pyi"):
        name = ".".join(stub.relative_to(PACKAGE.parent).with_suffix("").parts)
        mods.setdefault(name, stub)
    return mods


def _is_package(name: str, mods: dict[str, Path]) -> bool:
    return mods[name].name == "__init__.py"


def _import_kinds(tree: ast.Module) -> tuple[set[int], set[int]]:
    """The ids of import nodes that do not run when the module is imported: (inside a function,
    under `if TYPE_CHECKING:`)."""
    lazy: set[int] = set()
    typing_only: set[int] = set()

    def mark(node: ast.AST, into: set[int]) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                into.add(id(sub))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            mark(node, lazy)
        elif isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    mark(stmt, typing_only)
    return lazy - typing_only, typing_only


@functools.cache
def python_graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(top-level graph, lazy edges) over the package's modules."""
    mods = python_modules()
    top: dict[str, set[str]] = {m: set() for m in mods}
    lazy: dict[str, set[str]] = {m: set() for m in mods}

    def resolve(target: str) -> str | None:
        # The deepest module the dotted name names (`a.b.c` where c is a function: `a.b`).
        parts = target.split(".")
        while parts:
            name = ".".join(parts)
            if name in mods:
                return name
            parts.pop()
        return None

    for mod, path in mods.items():
        if path.suffix == ".pyi":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        lazy_ids, typing_ids = _import_kinds(tree)
        package = mod if _is_package(mod, mods) else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    start = ".".join(base + ([node.module] if node.module else []))
                else:
                    start = node.module or ""
                # `from a import b`: b may be a submodule (an edge to it) or a name in a.
                targets = [f"{start}.{a.name}" if f"{start}.{a.name}" in mods else start for a in node.names]
            if id(node) in typing_ids:
                continue
            for t in targets:
                dep = resolve(t)
                if dep is None or dep == mod:
                    continue
                (lazy if id(node) in lazy_ids else top)[mod].add(dep)
    return top, lazy


def test_python_top_level_imports_have_no_cycles() -> None:
    top, _ = python_graphs()
    assert len(top) > 40  # the package was found
    assert cycles(top) == []


def test_python_imports_with_lazy_ones_have_no_cycles() -> None:
    top, lazy = python_graphs()
    both = {m: top[m] | lazy[m] for m in top}
    assert cycles(both) == []


# ---------------------------------------------------------------- Rust


_RUST_NOISE = re.compile(
    r"""//[^\n]*|/\*.*?\*/|(?<![\w])b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|'(?:\\.[^']*|[^\\'])'""",
    re.DOTALL,
)


def _strip_rust(text: str) -> str:
    """The code without comments, string and char literals (a literal becomes `""`)."""
    return _RUST_NOISE.sub(lambda m: "" if m.group(0).startswith("/") else '""', text)


def _drop_cfg_test(code: str) -> str:
    """`code` without the items under `#[cfg(test)]`."""
    out = []
    i = 0
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        if m.start() < i:
            continue
        out.append(code[i : m.start()])
        j = m.end()
        # The item: up to its `;` (a `mod x;`) or its matching closing brace.
        depth = 0
        while j < len(code):
            if code[j] == ";" and depth == 0:
                j += 1
                break
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            j += 1
        i = j
    out.append(code[i:])
    return "".join(out)


def _expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` → [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as\w+$", "", tree)] if tree else []
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    return [p for item in items if item for p in _expand_use(prefix + item)]


def rust_modules() -> dict[tuple[str, ...], Path]:
    """Module path → file, following `mod x;` declarations from `lib.rs` (so a test file
    included with `#[path]` or `mod tests;` under `#[cfg(test)]` is not a module here)."""
    mods: dict[tuple[str, ...], Path] = {}

    def walk(path: tuple[str, ...], file: Path) -> None:
        mods[path] = file
        code = _drop_cfg_test(_strip_rust(file.read_text(encoding="utf-8")))
        here = file.parent if file.name in ("lib.rs", "mod.rs") else file.with_suffix("")
        for m in re.finditer(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code):
            name = m.group(1)
            for cand in (here / f"{name}.rs", here / name / "mod.rs"):
                if cand.exists():
                    walk((*path, name), cand)
                    break

    walk((), SRC / "lib.rs")
    return mods


@functools.cache
def rust_graph() -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    mods = rust_modules()
    codes = {m: _drop_cfg_test(_strip_rust(f.read_text(encoding="utf-8"))) for m, f in mods.items()}

    # Names each module re-exports from elsewhere: `pub use a::b::Name;` → (module, Name) → path.
    reexports: dict[tuple[tuple[str, ...], str], list[str]] = {}

    def absolute(mod: tuple[str, ...], segs: list[str]) -> list[str] | None:
        """`segs` (a path written in `mod`) as a path from the crate root."""
        if not segs:
            return None
        base = list(mod)
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("super", "self"):
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
            return base + segs
        if tuple([*base, segs[0]]) in mods:  # a child module, named without `self::`
            return base + segs
        return None

    for mod, code in codes.items():
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for p in _expand_use(m.group(1)):
                abs_path = absolute(mod, p.split("::"))
                if abs_path and abs_path[-1] not in ("*", "self"):
                    reexports[(mod, abs_path[-1])] = abs_path

    def resolve(abs_path: list[str], seen: int = 0) -> tuple[str, ...] | None:
        for k in range(len(abs_path), -1, -1):
            head = tuple(abs_path[:k])
            if head in mods:
                rest = abs_path[k:]
                if rest and (head, rest[0]) in reexports and seen < 8:
                    return resolve(reexports[(head, rest[0])] + rest[1:], seen + 1) or head
                return head
        return None

    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in mods}
    for mod, code in codes.items():
        paths: list[str] = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths += _expand_use(m.group(1))
        body = re.sub(r"\buse\s+[^;]+;", " ", code)
        children = [m[-1] for m in mods if m and m[:-1] == mod]
        start = r"(?:crate|super|self" + "".join(f"|{re.escape(c)}" for c in children) + ")"
        paths += re.findall(r"(?<![\w:])(" + start + r"(?:::\w+)+)", body)
        for p in paths:
            abs_path = absolute(mod, p.split("::"))
            dep = resolve(abs_path) if abs_path is not None else None
            # A module using its own folder's `mod.rs` (an ancestor) uses the folder's shared
            # vocabulary; only edges to other modules can close a cycle.
            if dep is not None and dep != mod[: len(dep)]:
                graph[mod].add(dep)
    return graph


def _named(comps: list[list[tuple[str, ...]]]) -> list[list[str]]:
    return [["::".join(m) or "crate" for m in c] for c in comps]


def test_rust_core_modules_have_no_cycles() -> None:
    graph = rust_graph()
    core = {m: {d for d in ds if d[:1] != ("python",)} for m, ds in graph.items() if m[:1] != ("python",)}
    assert ("formats", "gemini") in core and ("validate", "problem") in core  # the layout was read
    assert _named(cycles(core)) == []


def test_rust_binding_modules_have_no_cycles() -> None:
    graph = rust_graph()
    binding = {m: {d for d in ds if d[:1] == ("python",)} for m, ds in graph.items() if m[:1] == ("python",)}
    assert ("python", "render", "gemini") in binding
    assert _named(cycles(binding)) == []


def test_the_core_never_uses_the_binding() -> None:
    graph = rust_graph()
    uses = {m: sorted(d for d in ds if d[:1] == ("python",)) for m, ds in graph.items() if m[:1] != ("python",) and m}
    assert {m: ds for m, ds in uses.items() if ds} == {}


# ---------------------------------------------------------------- Format matches


def _match_arms(body: str) -> list[str]:
    """The arm patterns (guards included) of a `match` body (the text between its braces)."""
    arms, start, i, depth = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and body.startswith("=>", i):
            arms.append(body[start:i].strip())
            i += 2
            while i < len(body) and body[i].isspace():
                i += 1
            # Skip the arm's expression: a block, or up to the next top-level comma.
            d = 0
            while i < len(body):
                ch = body[i]
                if ch in "([{":
                    d += 1
                elif ch in ")]}":
                    d -= 1
                    if d == 0 and ch == "}" and body[i + 1 : i + 2].strip() in ("", ","):
                        # A block arm ends at its brace (a comma after it is optional).
                        rest = body[i + 1 :].lstrip()
                        if not rest.startswith((".", "?")):
                            i += 1
                            if body[i : i + 1] == ",":
                                i += 1
                            break
                elif ch == "," and d == 0:
                    i += 1
                    break
                i += 1
            start = i
            continue
        i += 1
    return arms


def format_matches() -> list[tuple[str, list[str]]]:
    """(file, arm patterns) of every `match` with an arm naming a `Format::` variant."""
    out = []
    for path in sorted(SRC.rglob("*.rs")):
        code = _strip_rust(path.read_text(encoding="utf-8"))
        for m in re.finditer(r"\bmatch\b[^{;]*\{", code):
            j, depth = m.end(), 1
            while j < len(code) and depth:
                depth += code[j] == "{"
                depth -= code[j] == "}"
                j += 1
            arms = _match_arms(code[m.end() : j - 1])
            if any("Format::" in a.split(" if ")[0] for a in arms):
                out.append((str(path.relative_to(ROOT)), arms))
    return out


CATCH_ALL = re.compile(r"^(?:_|Some\(_\)|None\s*\|\s*Some\(_\)|Some\(\s*[a-z_]\w*\s*\)|[a-z_]\w*)$")


def test_no_catch_all_arm_in_a_match_on_a_format() -> None:
    """A new `Format` variant must be a compile error wherever a format is matched (DESIGN: a
    new format is a new file; `docs/formats.md` lists the places)."""
    found = format_matches()
    assert len(found) >= 8  # the matches were found
    bad = [(f, a) for f, arms in found for a in arms if " if " not in a and CATCH_ALL.match(a)]
    assert bad == []


def test_the_catch_all_check_sees_catch_alls() -> None:
    body = "Format::Gemini => true,\n Some(Format::OpenAi) => { x(); }\n _ => false,"
    assert _match_arms(body) == ["Format::Gemini", "Some(Format::OpenAi)", "_"]
    assert CATCH_ALL.match("_") and CATCH_ALL.match("Some(_)") and CATCH_ALL.match("other")
    assert not CATCH_ALL.match("Format::OpenAi | Format::Anthropic")
