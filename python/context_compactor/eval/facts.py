"""Must-keep facts (DESIGN's definition: file paths, URLs and error names in user and assistant text
and in the string values of tool-call arguments), read in Python from raw messages.

Written from DESIGN.md, not from the Rust fact scanner (``src/summary/facts``): the eval's recall
probe is a second opinion on the core, so it must not ask the core what the facts are. For the
same reason this module is the fact extractor of the test oracle (``tests/_oracle.py``): pure
Python, reading each wire format straight from its shape, never through ``_core``.

Text of a message (where facts are looked for)
    Only ``user`` and ``assistant`` messages, plus any message whose text starts with the summary
    marker ``[context-compactor summary]`` (an earlier summary, whatever its role). Their ``str``
    content, and ``text`` (Responses: ``input_text``/``output_text``) parts/blocks of list
    content. Not ``thinking``/``redacted_thinking`` blocks, not tool results (OpenAI ``tool``
    messages, Anthropic ``tool_result`` blocks, Responses ``*_output`` items, Gemini
    ``function_response`` parts), not system/developer messages, not Responses ``reasoning``
    items. Tool-call arguments are read as *values*: OpenAI ``tool_calls[].function.arguments``
    (and legacy ``function_call.arguments``) and Responses ``function_call.arguments`` (or a
    ``custom_tool_call``'s ``input``) are parsed as JSON and every string value (at any depth) is
    a text; unparsable arguments count as one text. Anthropic ``tool_use``/``server_tool_use``
    ``input`` and Gemini ``function_call.args`` are walked the same way. A Gemini content (a
    message with ``parts``, dicts in snake or camel case or ``google.genai`` objects) gives its
    ``text`` parts that are not ``thought`` and its call arguments, whatever its role.

Facts (must-keep), found in those texts
    URL        ``(https?|ftp|wss?|file)://`` followed by ASCII URL characters (letters, digits and
               ``-._~:/?#@!$&*+,;=%``; parentheses, brackets, quotes, spaces and every non-ASCII
               character end it), trailing ``.,;:!?*`` stripped, with a letter or digit after
               the ``://`` (``http://${HOST}`` in a template string is not one).
    Error      an identifier ``[A-Z][A-Za-z0-9_]*`` ending in ``Error``, ``Exception`` or
               ``Warning`` (Python's warnings are exception classes too) with
               something before the suffix (``ValueError``, ``HTTPError``; not bare ``Error``),
               bounded by non-``[A-Za-z0-9_]`` characters (so Chinese prose may touch it); and
               the exception name on the first unindented line after a
               ``Traceback (most recent call last):`` line (``KeyboardInterrupt``, the last dotted
               component, starting with a capital).
    Path       URLs are blanked out first. A candidate is a maximal run of ``[A-Za-z0-9_./~-]``
               (so CJK characters, full-width punctuation ``，。：（）「」``, spaces, quotes, ``:``
               of ``file.py:12``, ``=`` and backslashes all delimit it), trailing dots and leading
               dashes, a glued flag (``-I/opt/x`` -> ``/opt/x``) and a leading ``.../`` stripped,
               not followed by ``(`` (``response.json()`` is a call), not glued after ``$``,
               ``)``, ``}``, ``]``, ``@``, ``*`` or ``?`` (``$HOME/x.py``, ``$(pwd)/x``,
               ``${ROOT}/build/x``, the import alias ``@/hooks/types``, a glob's
               ``**/*.jsonl?/.ndjson``: the part after it is a fragment, not a path).
               A brace expansion's group with a comma and a letter is part of the run
               (``docs/{zh,en}/x.md``; a regex's ``/{2,}/g`` is not one):
               such a run is a path, stored as written, when its first expansion
               (``docs/zh/x.md``) is one — the expansions are not in the text, and ``/x.md``
               alone is not a path the text names. It is a path
               when it holds a letter and:
               - it contains ``/`` (not starting with ``//``, first segment not a sed command
                 like ``1s``) and is absolute with >= 2 segments or a known extension
                 (``/etc/hosts``, ``/setup.py``; not ``/compact``) or a well-known top directory
                 (``/testbed``, ``/tmp``: ``ROOTS``), or starts with ``./``,
                 ``../`` or ``~/`` and names something after that, or is relative with a known
                 extension on its last segment (``src/lib.rs``), >= 4 segments, or >= 2 segments
                 and a trailing ``/`` (``src/planner/``) or a project directory first
                 (``src/marshmallow``: ``PROJECT_DIRS``) — so ``and/or``, ``TCP/IP``,
                 ``application/json`` and ``done/in_progress/pending`` are not paths;
               - or it has no ``/`` and is ``name.ext`` with a known extension (``foo.py``,
                 ``Cargo.toml``; see ``EXTENSIONS``: attribute-like ones such as ``.log``,
                 ``.lock``, ``.env``, ``.db`` are left out because ``console.log`` and
                 ``self.lock`` are code; ``Vue.js``-style capitalised ``.js`` names are
                 libraries), a known dotfile (``.gitignore``) or build file (``Makefile``).
               Placeholders are paths when the text names them (``/path/to/working/dir`` and
               ``newfile.py`` in a task's instructions are what the agent is told to use).
               A path is stored without its trailing ``/``, without a leading ``./`` when a ``/``
               follows (``./src/pkg/`` and ``src/pkg`` are the same directory) and without a git
               diff's ``a/``/``b/`` prefix (``a/src/x.py`` names ``src/x.py``; no one calls the
               file ``a/src/x.py``). Pseudo-devices (``/dev/null``, ``/dev/stdout``, ...: ``DEVICES``)
               are not facts: ``2>/dev/null`` is a redirection in half the shell commands of a run
               and names no file of the work; a real device (``/dev/sda1``) is a path.
    Binary     Data URIs (``data:image/png;base64,…``) and base64 runs (64+ characters of the
               base64 alphabet with both cases and a digit) are blanked before anything is looked
               for: no URL, error or path is read inside them (the core skips them too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "CUT_MARKER",
    "SUMMARY_MARKER",
    "blank_blobs",
    "call_argument_texts",
    "fact_texts",
    "facts_in_text",
    "gemini_parts",
    "get",
    "haystack",
    "is_gemini",
    "is_summary",
    "message_facts",
    "part_field",
    "paths",
    "role",
    "string_values",
    "text_of",
]


def get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` of a mapping, ``obj.key`` of an SDK object."""
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def role(message: Any) -> str:
    r = get(message, "role")
    return r if isinstance(r, str) else ""


#: Written out, not imported from ``_core``: what the facts are is decided here, apart from the core.
SUMMARY_MARKER = "[context-compactor summary]"
#: The mark of a cut text (a shortened task or tool result).
CUT_MARKER = re.compile(r"…\[\d+ chars omitted\]…")
#: A word an ellipsis touches: a fragment of text cut earlier (the cut marker, a rule summary's "…").
AROUND_CUT_RE = re.compile(r"[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*…[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*")
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
PATH_TOKEN_RE = re.compile(r"(?:[A-Za-z0-9_./~\-]|\{(?=[^{}]*[A-Za-z])[A-Za-z0-9_./~\-]*,[A-Za-z0-9_./~,\-]*\})+")
BRACE_GROUP_RE = re.compile(r"\{([^{},]*),[^{}]*\}")
BARE_FILE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\.([A-Za-z0-9]+)")
LETTER_RE = re.compile(r"[A-Za-z]")
LETTER_OR_DIGIT_RE = re.compile(r"[A-Za-z0-9]")
SED_RE = re.compile(r"\d*s")  # "1s/old/new/": a sed command, not a path
FLAG_RE = re.compile(r"-[A-Za-z]/")  # "-I/opt/include": a flag glued to a path


# -- facts -----------------------------------------------------------------------------------------


def urls(text: str) -> list[str]:
    out = []
    for m in URL_RE.finditer(text):
        u = m.group().rstrip(".,;:!?*")
        # A host (or a file URL's path) with a letter or digit: ``http://${HOST}:${PORT}`` in a
        # template string is no URL the text names.
        if LETTER_OR_DIGIT_RE.search(u[u.index("://") + 3 :]):
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
        if m.start() > 0 and text[m.start() - 1] in "$)}]@?*":
            # "$HOME/x.py", "$(pwd)/x", "${ROOT}/build/x": a path spelled with a variable; the
            # part after it is a fragment, not a path. So is "/hooks/types" of the import alias
            # "@/hooks/types" (no file is at /hooks), and what follows a glob's or a regex's
            # "*" or "?" ("sessions/**/*.jsonl?/.ndjson/.json").
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


#: A data URI (``data:image/png;base64,iVBOR…``): its payload is no path and no URL.
DATA_URI_RE = re.compile(r"data:[A-Za-z0-9.+/-]*(?:;[A-Za-z0-9.=+-]+)*,[A-Za-z0-9+/=%._~-]*")
#: A base64 run: 64 or more characters of the base64 alphabet (standard or URL-safe) with upper
#: and lower case and a digit. Its ``/`` make path-like fragments (``aB3/x9Q/…``: a console dump
#: of an image counted 628 of them as paths); real paths of that length hold ``.``, ``_`` or
#: ``-`` far sooner, and are not blanked.
BASE64_RE = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}|[A-Za-z0-9_-]{64,}={0,2}")


def _is_base64(run: str) -> bool:
    return any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)


def blank_blobs(text: str) -> str:
    """``text`` with data URIs and base64 runs replaced by a space: binary data, not facts."""
    if "data:" in text:
        text = DATA_URI_RE.sub(" ", text)
    return BASE64_RE.sub(lambda m: " " if _is_base64(m.group()) else m.group(), text)


def facts_in_text(text: str) -> list[str]:
    """The facts of one text, in order of appearance by kind (URLs, errors, paths). Words an
    ellipsis ``…`` touches are fragments of a text cut earlier, not facts; data URIs and base64
    runs are binary data (:func:`blank_blobs`)."""
    text = AROUND_CUT_RE.sub(" ", blank_blobs(text))
    found = urls(text)
    rest = URL_RE.sub(" ", text)
    found += error_names(rest) + traceback_names(rest) + paths(rest)
    return list(dict.fromkeys(found))


# -- where facts are read --------------------------------------------------------------------------


def string_values(value: Any, *, parse_arguments: bool = False) -> Iterator[str]:
    """Every string value inside a JSON-like value (dict values, list items, SDK objects through
    ``model_dump``), not keys. With ``parse_arguments``, the JSON text of an ``arguments`` key also
    gives its parsed values (a tool call's arguments, as :func:`haystack` reads an output)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from string_values(v, parse_arguments=parse_arguments)
            if parse_arguments and k == "arguments" and isinstance(v, str):
                yield from argument_values(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from string_values(v, parse_arguments=parse_arguments)
    elif hasattr(value, "model_dump"):
        yield from string_values(value.model_dump(), parse_arguments=parse_arguments)


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


#: Responses part types that hold text (besides ``text``).
TEXT_PARTS = ("text", "input_text", "output_text")
#: Responses call items whose arguments are read (``arguments``, or a custom tool's ``input``).
RESPONSES_CALLS = ("function_call", "custom_tool_call")


def content_texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, (list, tuple)):
        return
    for part in content:
        kind = get(part, "type")
        if kind in TEXT_PARTS and isinstance(get(part, "text"), str):
            yield get(part, "text")
        elif kind in ("tool_use", "server_tool_use"):
            yield from argument_values(get(part, "input"))


# -- Gemini contents (dicts in snake or camel case, or google.genai objects) ------------------------


def is_gemini(message: Any) -> bool:
    """A Gemini ``Content``: a dict with ``parts`` and no ``content``, or a ``google.genai`` one."""
    if isinstance(message, dict):
        return "parts" in message and "content" not in message
    return type(message).__name__ == "Content" and type(message).__module__.startswith("google")


def gemini_parts(message: Any) -> list[Any]:
    return list(get(message, "parts") or ())


def part_field(part: Any, key: str) -> Any:
    """A Gemini part's field by its snake-case name (a dict may spell it in camel case)."""
    if isinstance(part, dict):
        camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
        v = part.get(key)
        return v if v is not None else part.get(camel)
    return getattr(part, key, None)


def _gemini_call_texts(message: Any) -> list[str]:
    texts: list[str] = []
    for p in gemini_parts(message):
        fc = part_field(p, "function_call")
        if fc is not None:
            texts += string_values(part_field(fc, "args"))
    return texts


def _gemini_fact_texts(message: Any) -> list[str]:
    """Text parts that are not thoughts, and the string values of call arguments, in order."""
    texts: list[str] = []
    for p in gemini_parts(message):
        t = part_field(p, "text")
        if isinstance(t, str) and not part_field(p, "thought"):
            texts.append(t)
        fc = part_field(p, "function_call")
        if fc is not None:
            texts += string_values(part_field(fc, "args"))
    return texts


# -- every format ---------------------------------------------------------------------------------


def _responses_call_arguments(message: Any) -> list[Any]:
    """A Responses call item's arguments (raw), or ``[]`` for any other message."""
    if get(message, "type") not in RESPONSES_CALLS:
        return []
    args = get(message, "arguments")
    return [args if isinstance(args, str) else get(message, "input") or ""]


def is_summary(message: Any) -> bool:
    """Whether the message's text starts with the summary marker (an earlier summary)."""
    texts = _gemini_fact_texts(message) if is_gemini(message) else content_texts(get(message, "content"))
    return any(t.startswith(SUMMARY_MARKER) for t in texts)


def call_argument_texts(message: Any) -> list[str]:
    """The string values of a message's tool-call arguments (a part of :func:`fact_texts`)."""
    if is_gemini(message):
        return _gemini_call_texts(message)
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
    for args in _responses_call_arguments(message):
        texts += argument_values(args)
    return texts


def fact_texts(message: Any) -> list[str]:
    """The texts of a message that facts are read from (see the module docstring)."""
    if _responses_call_arguments(message):
        return call_argument_texts(message)
    if is_gemini(message):
        return _gemini_fact_texts(message)
    if role(message) not in ("user", "assistant") and not is_summary(message):
        return []
    texts = list(content_texts(get(message, "content")))
    for call in get(message, "tool_calls") or ():
        texts += argument_values(get(get(call, "function"), "arguments"))
    legacy = get(message, "function_call")
    if legacy is not None:
        texts += argument_values(get(legacy, "arguments"))
    return texts


def haystack(messages: Sequence[Any], system: Any = None) -> str:
    """Every string of a context (messages and system), tool-call arguments also as parsed values."""
    return "\n".join(string_values([list(messages), system], parse_arguments=True))


def message_facts(message: Any) -> list[str]:
    """The must-keep facts of one message, in order, no repeats."""
    return list(dict.fromkeys(f for t in fact_texts(message) for f in facts_in_text(t)))


def text_of(message: Any) -> str:
    """The prose of a message: its ``str`` content or its ``text`` parts/blocks (a Gemini
    content's text parts that are not thoughts)."""
    if is_gemini(message):
        texts = [part_field(p, "text") for p in gemini_parts(message) if not part_field(p, "thought")]
        return "\n".join(t for t in texts if isinstance(t, str))
    return "\n".join(t for t in content_texts(get(message, "content")) if isinstance(t, str))
