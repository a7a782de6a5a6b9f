"""Must-keep facts (DESIGN's definition: file paths, URLs and error names in user and assistant text
and in the string values of tool-call arguments), read in Python from raw messages.

Written from DESIGN.md, not from the Rust fact scanner (``src/summary/facts``): the eval's recall
probe is a second opinion on the core, so it must not ask the core what the facts are. The rules
(which tokens are paths, which identifiers are error names) are spelled out in the test oracle's
docstring (``tests/_oracle.py``), of which this is the package's own copy: the library does not
import its tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["fact_texts", "facts_in_text", "get", "haystack", "message_facts", "paths", "role", "text_of"]


def get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` of a mapping, ``obj.key`` of an SDK object."""
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def role(message: Any) -> str:
    r = get(message, "role")
    return r if isinstance(r, str) else ""


SUMMARY_MARKER = "[context-compactor summary]"
CUT_MARKER = re.compile(r"…\[\d+ chars omitted\]…")
#: A word an ellipsis touches: a fragment of text cut earlier (the cut marker, a rule summary's "…").
AROUND_CUT_RE = re.compile(r"[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*…[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*")
#: Tokens a shortened task may exceed ``task_max_tokens`` by (the cut marker and rounding).
# fmt: off
EXTENSIONS = frozenset((
    "py", "pyi", "pyx", "ipynb", "rs", "toml", "js", "mjs", "cjs", "ts", "tsx", "jsx", "json", "jsonl",
    "yaml", "yml", "md", "markdown", "rst", "txt", "csv", "tsv", "xml", "html", "htm", "css", "scss", "sass",
    "less", "vue", "svelte", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "go", "java", "kt", "kts", "scala",
    "rb", "php", "sh", "bash", "zsh", "fish", "ps1", "bat", "sql", "sqlite", "ini", "cfg", "conf",
    "properties", "gradle", "mk", "cmake", "proto", "graphql", "swift", "dart", "lua", "jl", "ex", "exs",
    "erl", "hs", "ml", "clj", "pony", "zig", "nim", "tf", "patch", "diff", "png", "jpg", "jpeg", "gif", "svg",
    "webp", "ico", "pdf", "zip", "tar", "gz", "tgz", "bz2", "xz", "whl", "so", "dll", "dylib", "exe", "wasm",
    "dcm", "pem", "crt", "pl",
))
DOTFILES = frozenset((
    ".env", ".gitignore", ".gitattributes", ".gitmodules", ".dockerignore", ".editorconfig", ".bashrc",
    ".zshrc", ".profile", ".npmrc", ".prettierrc", ".eslintrc", ".flake8", ".pylintrc", ".coveragerc",
))
#: File names without an extension that are files wherever they are named.
FILE_NAMES = frozenset(("Makefile", "Dockerfile", "Jenkinsfile", "Gemfile", "Rakefile", "Procfile"))
#: Top-level directories a one-segment absolute path names (``cd /testbed``; ``/compact`` is a command).
ROOTS = frozenset(("tmp", "testbed", "workspace", "root", "home", "opt", "srv", "etc", "usr", "var", "mnt"))
#: First directories that make ``dir/name`` a path without an extension (``src/marshmallow``).
PROJECT_DIRS = frozenset(("src", "lib", "test", "tests", "docs", "scripts", "app", "web", "examples", "packages"))
#: Pseudo-devices of shell redirections (``2>/dev/null``): constants of the system, not files.
DEVICES = frozenset(
    f"/dev/{d}" for d in ("null", "zero", "full", "random", "urandom", "tty", "stdin", "stdout", "stderr")
)
# fmt: on

URL_RE = re.compile(r"(?:https?|ftp|wss?|file)://[A-Za-z0-9\-._~:/?#@!$&*+,;=%]+")
ERROR_RE = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Za-z0-9_]*(?:Error|Exception|Warning)(?![A-Za-z0-9_])")
TRACEBACK = "Traceback (most recent call last):"
EXC_LINE_RE = re.compile(r"([A-Za-z_][\w.]*)(?::|$)")
#: A run of path characters; a brace expansion's group (``{zh,en}``: a comma inside) is part of it.
PATH_TOKEN_RE = re.compile(r"(?:[A-Za-z0-9_./~\-]|\{[A-Za-z0-9_./~\-]*,[A-Za-z0-9_./~,\-]*\})+")
BRACE_GROUP_RE = re.compile(r"\{([^{},]*),[^{}]*\}")
BARE_FILE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\.([A-Za-z0-9]+)")
LETTER_RE = re.compile(r"[A-Za-z]")
SED_RE = re.compile(r"\d*s")  # "1s/old/new/": a sed command, not a path
FLAG_RE = re.compile(r"-[A-Za-z]/")  # "-I/opt/include": a flag glued to a path


# -- facts -----------------------------------------------------------------------------------------


def urls(text: str) -> list[str]:
    out = []
    for m in URL_RE.finditer(text):
        u = m.group().rstrip(".,;:!?*")
        if len(u) > u.index("://") + 3:
            out.append(u)
    return out


def error_names(text: str) -> list[str]:
    return [m.group() for m in ERROR_RE.finditer(text)]


def traceback_names(text: str) -> list[str]:
    """The exception named on the first unindented line after each traceback header."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if TRACEBACK not in line:
            continue
        for nxt in lines[i + 1 :]:
            if not nxt.strip() or nxt[:1].isspace():
                continue
            m = EXC_LINE_RE.match(nxt)
            if m:
                name = m.group(1).rsplit(".", 1)[-1]
                if name[:1].isupper() and len(name) >= 3:
                    out.append(name)
            break
    return out


def is_path(token: str) -> bool:
    if not LETTER_RE.search(token):
        return False
    if "/" not in token:
        if token in DOTFILES or token in FILE_NAMES:
            return True
        m = BARE_FILE_RE.fullmatch(token)
        if not m or m.group(1) not in EXTENSIONS:
            return False
        # "Vue.js", "Chart.js": library names, not files.
        return not (m.group(1) == "js" and token[:1].isupper())
    if token.startswith("//"):
        return False
    segments = [s for s in token.split("/") if s]
    if not segments or SED_RE.fullmatch(segments[0]):
        return False
    last = segments[-1]
    stem, dot, ext = last.rpartition(".")
    has_ext = bool(dot and stem and ext in EXTENSIONS)
    if token.startswith("/"):
        return len(segments) >= 2 or has_ext or segments[0] in ROOTS
    if token.startswith(("./", "../", "~/")):
        return any(s not in (".", "..", "~") for s in segments)
    return (
        has_ext or len(segments) >= 4 or (len(segments) >= 2 and (token.endswith("/") or segments[0] in PROJECT_DIRS))
    )


def normalize_path_token(token: str) -> str:
    """Trailing dots, leading dashes, a glued compiler flag (``-I/opt/x``) and a leading ellipsis
    (``.../x.py``) are not part of the path."""
    token = token.rstrip(".")
    if FLAG_RE.match(token):
        token = token[2:]
    token = token.lstrip("-")
    while token.startswith(".../"):
        token = token[4:]
    return token


def path_of(token: str) -> str | None:
    """The path a normalized token names, as it is stored: without a trailing ``/`` (``src/pkg/``
    and ``src/pkg`` are the same directory), without a redundant leading ``./`` when a ``/``
    follows (``./src/pkg`` is ``src/pkg``; a lone ``./build`` stays as written, ``build`` alone
    would be a word), without a git diff's ``a/``/``b/`` prefix (``a/src/x.py`` is ``src/x.py``),
    and not a pseudo-device."""
    if not token or not is_path(token):
        return None
    path = token.rstrip("/") if len(token) > 1 else token
    if path.startswith("./") and "/" in path[2:]:
        path = path[2:]
    if path[:2] in ("a/", "b/") and "/" in path[2:] and is_path(path[2:]):
        path = path[2:]
    return None if path in DEVICES else path


def paths(text: str) -> list[str]:
    out = []
    for m in PATH_TOKEN_RE.finditer(text):
        if text[m.end() : m.end() + 1] == "(":
            continue
        if m.start() > 0 and text[m.start() - 1] in "$)}]@":
            # "$HOME/x.py", "$(pwd)/x", "${ROOT}/build/x": a path spelled with a variable; the
            # part after it is a fragment, not a path. So is "/hooks/types" of the import alias
            # "@/hooks/types" (no file is at /hooks).
            continue
        token = normalize_path_token(m.group())
        if "{" in token:
            # A brace expansion ("docs/{zh,en}/x.md") is a path, written as it stands (its
            # expansions are not in the text), when its first expansion is one.
            written = token.rstrip("/")
            expanded = BRACE_GROUP_RE.sub(lambda g: g.group(1), written)
            if path_of(expanded) == expanded:
                out.append(written)
            continue
        path = path_of(token)
        if path is not None:
            out.append(path)
    return out


def facts_in_text(text: str) -> list[str]:
    """The facts of one text, in order of appearance by kind (URLs, errors, paths). Words an
    ellipsis ``…`` touches are fragments of a text cut earlier, not facts."""
    text = AROUND_CUT_RE.sub(" ", text)
    found = urls(text)
    rest = URL_RE.sub(" ", text)
    found += error_names(rest) + traceback_names(rest) + paths(rest)
    return list(dict.fromkeys(found))


# -- where facts are read --------------------------------------------------------------------------


def string_values(value: Any) -> Iterator[str]:
    """Every string value inside a JSON-like value (dict values, list items), not keys."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from string_values(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from string_values(v)
    elif hasattr(value, "model_dump"):
        yield from string_values(value.model_dump())


def argument_values(arguments: Any) -> Iterator[str]:
    """The string values of a tool call's arguments (JSON text parsed; a dict walked)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            yield arguments
            return
        yield from string_values(parsed)
    else:
        yield from string_values(arguments)


def content_texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, (list, tuple)):
        return
    for part in content:
        kind = get(part, "type")
        if kind == "text" and isinstance(get(part, "text"), str):
            yield get(part, "text")
        elif kind in ("tool_use", "server_tool_use"):
            yield from argument_values(get(part, "input"))


def is_summary(message: Any) -> bool:
    return any(t.startswith(SUMMARY_MARKER) for t in content_texts(get(message, "content")))


def call_argument_texts(message: Any) -> list[str]:
    """The string values of a message's tool-call arguments (a part of :func:`fact_texts`)."""
    texts: list[str] = []
    content = get(message, "content")
    for part in content if isinstance(content, (list, tuple)) else ():
        if get(part, "type") in ("tool_use", "server_tool_use"):
            texts += argument_values(get(part, "input"))
    for call in get(message, "tool_calls") or ():
        texts += argument_values(get(get(call, "function"), "arguments"))
    legacy = get(message, "function_call")
    if legacy is not None:
        texts += argument_values(get(legacy, "arguments"))
    return texts


def fact_texts(message: Any) -> list[str]:
    """The texts of a message that facts are read from (see the module docstring)."""
    if role(message) not in ("user", "assistant") and not is_summary(message):
        return []
    texts = list(content_texts(get(message, "content")))
    for call in get(message, "tool_calls") or ():
        texts += argument_values(get(get(call, "function"), "arguments"))
    legacy = get(message, "function_call")
    if legacy is not None:
        texts += argument_values(get(legacy, "arguments"))
    return texts


def output_strings(value: Any) -> Iterator[str]:
    """Every string of the output, tool-call arguments also as parsed values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from output_strings(v)
            if k == "arguments" and isinstance(v, str):
                yield from argument_values(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from output_strings(v)
    elif hasattr(value, "model_dump"):
        yield from output_strings(value.model_dump())


def haystack(messages: Sequence[Any], system: Any = None) -> str:
    """Every string of a context (messages and system), tool-call arguments also as parsed values."""
    return "\n".join([*output_strings(list(messages)), *output_strings(system)])


def message_facts(message: Any) -> list[str]:
    """The must-keep facts of one message, in order, no repeats."""
    return list(dict.fromkeys(f for t in fact_texts(message) for f in facts_in_text(t)))


def text_of(message: Any) -> str:
    """The prose of a message: its ``str`` content or its ``text`` parts/blocks."""
    return "\n".join(t for t in content_texts(get(message, "content")) if isinstance(t, str))
