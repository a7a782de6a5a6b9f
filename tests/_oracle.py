"""An independent check of one compaction, written from DESIGN.md and not from the library's code.

(One concern, about 780 lines: the definitions below and one checker per definition, kept in one
file so the whole oracle can be read against DESIGN.md in one sitting.)

Nothing here calls the library's fact extraction (``result.must_keep``, ``must_keep_missing``),
its structure analysis or its validator: the point is a second opinion. The library is used only
for what the check is *about*: ``TokenCounter`` (the counts the library promises to match) and,
as a separate count, ``validate_messages``.

Definitions used here
=====================

Text of a message (where facts are looked for)
    Only ``user`` and ``assistant`` messages, plus any message whose text starts with the summary
    marker ``[context-compactor summary]`` (an earlier summary, whatever its role). Their ``str``
    content, and ``text`` parts/blocks of list content. Not ``thinking``/``redacted_thinking``
    blocks, not tool results (OpenAI ``tool`` messages, Anthropic ``tool_result`` blocks), not
    system/developer messages. Tool-call arguments are read as *values*: OpenAI
    ``tool_calls[].function.arguments`` (and legacy ``function_call.arguments``) are parsed as
    JSON and every string value (at any depth) is a text; unparsable arguments count as one text.
    Anthropic ``tool_use``/``server_tool_use`` ``input`` is walked the same way.

Facts (must-keep), found in those texts
    URL        ``(https?|ftp|wss?|file)://`` followed by ASCII URL characters (letters, digits and
               ``-._~:/?#@!$&*+,;=%``; parentheses, brackets, quotes, spaces and every non-ASCII
               character end it), trailing ``.,;:!?*`` stripped.
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
               ``)``, ``}``, ``]`` or ``@`` (``$HOME/x.py``, ``$(pwd)/x``, ``${ROOT}/build/x``,
               the import alias ``@/hooks/types``: the part after it is a fragment, not a path).
               A brace expansion's group with a comma is part of the run (``docs/{zh,en}/x.md``):
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

Removed or cut (whose facts must survive)
    Input message ``i`` is *kept* when the output holds the very same object (``is``); DESIGN
    invariant 3 returns kept messages as the same objects. Every other input message (summarised,
    dropped, truncated, shortened, edited) contributes all its facts. When the input system
    prompt holds an earlier summary (``summary_role="system"`` on Anthropic) and the output system
    differs, the input system's facts count too. A fact is *kept* when its string occurs anywhere
    in the output: any string of any output message (text, tool results, tool-call arguments raw
    and parsed) or of the output system prompt. Facts are a set per compaction.

Validity (second opinion next to ``validate_messages``)
    OpenAI: known roles; ``tool_calls`` not empty; an assistant without calls has content; the
    results of an assistant's calls follow it directly (only ``tool`` messages in between), each
    result answers a call of that assistant, once; a call left without its result is a problem
    unless its block ends the list (a trailing call may still wait).
    Anthropic: roles ``user``/``assistant``; the first message is ``user``; no empty content
    (except a final assistant message); ``tool_use`` blocks are answered in the very next message,
    a user message whose ``tool_result`` blocks come first and answer only calls of the assistant
    message right before it, once; a call is allowed to wait only in the last message. Thinking:
    in the pending loop of the output (assistant messages after the last user text), every
    assistant message holding a ``thinking``/``redacted_thinking`` block is an input object,
    unchanged.

The task
    The first ``user`` message of the input. Present when the output holds that object, or when
    ``result.record`` names it ``shortened`` and the output's first user message carries the cut
    marker ``…[N chars omitted]…``, holds every fact of the task and counts at most
    ``task_max_tokens`` (+ ``TASK_SLACK`` for the marker, + the tokens of the task's facts, which
    must stay even when they alone do not fit) with the library's counter. Along a chain
    of compactions the task is the object the previous check found (the original or its shortened
    form, even when that lost facts); once gone, later compactions of that chain are not blamed
    for it again.

Counts
    ``TokenCounter.count_messages`` of the output (with ``result.system``, or the input system,
    and the tools) equals ``result.tokens_after``; above the soft threshold ``over_budget`` is set
    (above the budget that is "over the window", counted apart).

Other checks
    The input (messages, system, tools) equals a deep copy taken before the call. Every input
    message not in the output as the same object has a ``result.record`` entry (invariant 6).

Smallest legal context (the ``over_budget`` check)
    See :func:`smallest_legal_context`. An ``over_budget`` result whose smallest legal context is
    under 90% of the soft threshold is flagged; a ``min_savings_ratio`` refusal (``strategy ==
    "none"``) below the hard threshold is counted apart, since DESIGN allows it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import _gemini
import _oracle_responses as _responses
from _messages import get, role

#: Written out, not imported from the package: the oracle is independent of the library it checks.
SUMMARY_MARKER = "[context-compactor summary]"
CUT_MARKER = re.compile(r"…\[\d+ chars omitted\]…")
#: A word an ellipsis touches: a fragment of text cut earlier (the cut marker, a rule summary's "…").
AROUND_CUT_RE = re.compile(r"[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*…[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*")
#: Tokens a shortened task may exceed ``task_max_tokens`` by (the cut marker and rounding).
TASK_SLACK = 24
#: Tokens a shortened or cleared tool result is assumed to keep at least (marker or placeholder).
SHORT_RESULT_TOKENS = 16
#: A summary's size assumed in the smallest legal context when the result has none.
NOMINAL_SUMMARY_TOKENS = 100
#: An ``over_budget`` result is flagged when the smallest legal context is under this share of
#: the soft threshold (10% margin for what the bound cannot know exactly).
SMALLER_CONTEXT_MARGIN = 0.9

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
        if kind in ("text", "input_text", "output_text") and isinstance(get(part, "text"), str):
            yield get(part, "text")
        elif kind in ("tool_use", "server_tool_use"):
            yield from argument_values(get(part, "input"))


def is_summary(message: Any) -> bool:
    if _gemini.is_gemini(message):
        return any(t.startswith(SUMMARY_MARKER) for t in _gemini.fact_texts(message))
    return any(t.startswith(SUMMARY_MARKER) for t in content_texts(get(message, "content")))


def call_argument_texts(message: Any) -> list[str]:
    """The string values of a message's tool-call arguments (a part of :func:`fact_texts`)."""
    if _gemini.is_gemini(message):
        return _gemini.call_argument_texts(message)
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
    for args in _responses.call_argument_texts(message):  # a Responses call item
        texts += argument_values(args)
    return texts


def fact_texts(message: Any) -> list[str]:
    """The texts of a message that facts are read from (see the module docstring)."""
    if _responses.call_argument_texts(message):
        return call_argument_texts(message)
    if _gemini.is_gemini(message):
        return _gemini.fact_texts(message)
    if role(message) not in ("user", "assistant") and not is_summary(message):
        return []
    texts = list(content_texts(get(message, "content")))
    for call in get(message, "tool_calls") or ():
        texts += argument_values(get(get(call, "function"), "arguments"))
    legacy = get(message, "function_call")
    if legacy is not None:
        texts += argument_values(get(legacy, "arguments"))
    return texts


class FactCache:
    """Facts per message object (the same transcript objects recur across the whole grid)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, frozenset[str]]] = {}

    def facts(self, message: Any) -> frozenset[str]:
        hit = self._by_id.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        found = frozenset(f for t in fact_texts(message) for f in facts_in_text(t))
        self._by_id[id(message)] = (message, found)
        return found


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
    return "\n".join([*output_strings(list(messages)), *output_strings(system)])


@dataclass
class FactCount:
    kept: int = 0
    total: int = 0
    lost: list[str] = field(default_factory=list)

    def add(self, other: FactCount) -> None:
        self.kept += other.kept
        self.total += other.total
        self.lost += other.lost


def removed_facts(
    inp: Sequence[Any], out: Sequence[Any], in_system: Any, out_system: Any, cache: FactCache
) -> set[str]:
    """Facts of every input message that is not in the output as the same object."""
    kept = {id(m) for m in out}
    facts: set[str] = set()
    for m in inp:
        if id(m) not in kept:
            facts |= cache.facts(m)
    system_text = "\n".join(string_values(in_system)) if in_system is not None else ""
    if SUMMARY_MARKER in system_text and out_system is not in_system and out_system != in_system:
        facts |= set(facts_in_text(system_text))
    return facts


def fact_recall(inp: Sequence[Any], out: Sequence[Any], in_system: Any, out_system: Any, cache: FactCache) -> FactCount:
    facts = removed_facts(inp, out, in_system, out_system, cache)
    if not facts:
        return FactCount()
    text = haystack(out, out_system)
    lost = sorted(f for f in facts if f not in text)
    return FactCount(kept=len(facts) - len(lost), total=len(facts), lost=lost)


# -- validity --------------------------------------------------------------------------------------


def _blocks(message: Any) -> list[Any]:
    content = get(message, "content")
    return list(content) if isinstance(content, (list, tuple)) else []


def _is_empty(content: Any) -> bool:
    return (
        content is None
        or (isinstance(content, str) and not content)
        or (isinstance(content, (list, tuple)) and not content)
    )


def openai_problems(messages: Sequence[Any]) -> list[str]:
    problems: list[str] = []
    waiting: dict[str, int] = {}  # call id -> index of its assistant message, results still due
    answered: set[str] = set()
    for i, m in enumerate(messages):
        r = role(m)
        if r not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"{i}: unknown role {r!r}")
        if r == "tool":
            cid = get(m, "tool_call_id")
            if cid in answered:
                problems.append(f"{i}: second result for call {cid}")
            elif cid not in waiting:
                problems.append(f"{i}: result for call {cid} without that call right before")
            else:
                del waiting[cid]
                answered.add(cid)
            continue
        if waiting:
            problems.append(f"{i}: calls {sorted(waiting)} of message {min(waiting.values())} get no result")
        waiting, answered = {}, set()
        if r == "assistant":
            calls = get(m, "tool_calls")
            if calls is not None and len(calls) == 0:
                problems.append(f"{i}: empty tool_calls")
            for call in calls or ():
                cid = get(call, "id")
                if cid in waiting:
                    problems.append(f"{i}: call id {cid} twice")
                waiting[cid] = i
            if not calls and get(m, "function_call") is None and get(m, "content") is None:
                problems.append(f"{i}: assistant message without content or calls")
    return problems


def anthropic_problems(messages: Sequence[Any]) -> list[str]:
    problems: list[str] = []
    if messages and role(messages[0]) != "user":
        problems.append(f"0: first message is {role(messages[0])!r}, not 'user'")
    for i, m in enumerate(messages):
        r = role(m)
        last = i == len(messages) - 1
        if r not in ("user", "assistant"):
            problems.append(f"{i}: role {r!r}")
        if _is_empty(get(m, "content")) and not (last and r == "assistant"):
            problems.append(f"{i}: empty content")
        blocks = _blocks(m)
        results = [b for b in blocks if get(b, "type") == "tool_result"]
        if results:
            prev = messages[i - 1] if i > 0 else None
            calls = {get(b, "id") for b in _blocks(prev)} if prev is not None and role(prev) == "assistant" else set()
            kinds = [get(b, "type") for b in blocks]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                problems.append(f"{i}: tool_result blocks are not first")
            ids = [get(b, "tool_use_id") for b in results]
            if len(set(ids)) != len(ids):
                problems.append(f"{i}: a call answered twice")
            for cid in ids:
                if cid not in calls:
                    problems.append(f"{i}: result for {cid} without that call in the message before")
        if r == "assistant":
            uses = [get(b, "id") for b in blocks if get(b, "type") == "tool_use"]
            if uses and not last:
                nxt = messages[i + 1]
                answered = {get(b, "tool_use_id") for b in _blocks(nxt) if get(b, "type") == "tool_result"}
                missing = [u for u in uses if u not in answered] if role(nxt) == "user" else uses
                if missing:
                    problems.append(f"{i}: calls {missing} get no result in the next message")
    return problems


def has_thinking(message: Any) -> bool:
    return any(get(b, "type") in ("thinking", "redacted_thinking") for b in _blocks(message))


def is_user_text(message: Any) -> bool:
    """A user message that is not only tool results (it starts a turn)."""
    if _gemini.is_gemini(message):
        return _gemini.is_user_text(message)
    if role(message) != "user":
        return False
    content = get(message, "content")
    if isinstance(content, str):
        return True
    return any(get(b, "type") != "tool_result" for b in _blocks(message))


def _through_thinking(message: Any) -> list[Any]:
    """The blocks of a message up to its last thinking block (what its signature covers)."""
    blocks = _blocks(message)
    last = max((k for k, b in enumerate(blocks) if get(b, "type") in ("thinking", "redacted_thinking")), default=-1)
    return blocks[: last + 1]


def pending_thinking_problems(inp: Sequence[Any], out: Sequence[Any]) -> list[str]:
    """Assistant messages with thinking after the output's last user text must be input objects,
    or come from one with everything up to its last thinking block unchanged (equal: what the
    provider checks; the budget ladder may cut a call's arguments or text after the thinking)."""
    originals = {id(m) for m in inp}
    prefixes = [_through_thinking(m) for m in inp if role(m) == "assistant" and has_thinking(m)]
    start = max((i for i, m in enumerate(out) if is_user_text(m)), default=-1) + 1
    return [
        f"{i}: thinking of the pending loop is not an input message unchanged"
        for i in range(start, len(out))
        if role(out[i]) == "assistant"
        and has_thinking(out[i])
        and id(out[i]) not in originals
        and _through_thinking(out[i]) not in prefixes
    ]


def validity_problems(inp: Sequence[Any], out: Sequence[Any], fmt: str) -> list[str]:
    if fmt == "responses":
        return _responses.validity(out)
    if fmt == "gemini":
        return _gemini.validity_problems(inp, out)
    if fmt == "anthropic":
        return anthropic_problems(out) + pending_thinking_problems(inp, out)
    return openai_problems(out)


# -- the task --------------------------------------------------------------------------------------


def task_index(messages: Sequence[Any]) -> int | None:
    return next((i for i, m in enumerate(messages) if role(m) == "user"), None)


def task_max_tokens(cfg: Any) -> int:
    value = getattr(cfg, "task_max_tokens", None)
    return value if value is not None else min(2000, cfg.budget // 4)


def message_tokens(counter: Any, message: Any, fmt: str) -> int:
    """A message's tokens without the per-message overhead."""
    return counter.count_messages([message], format=fmt) - counter.message_overhead_tokens


def task_problem(
    inp: Sequence[Any], ti: int | None, result: Any, fmt: str, counter: Any, cfg: Any, cache: FactCache
) -> tuple[str | None, Any]:
    """``(what is wrong or None, the task as it is in the output or None when it is gone)`` for the
    task ``inp[ti]`` (see the module docstring). ``ti=None``: no task to check."""
    if ti is None:
        return None, None
    task = inp[ti]
    out = result.messages
    if any(m is task for m in out):
        return None, task
    actions = sorted({e.action for e in result.record if e.index == ti})
    first = next((m for m in out if role(m) == "user"), None)
    if first is None:
        return f"no user message in the output; record for the task: {actions}", None
    text = haystack([first])
    if "shortened" not in actions:
        return f"task (input {ti}) not kept; record for it: {actions or 'nothing'}", None
    if not CUT_MARKER.search(text):
        return "task recorded shortened, but the first user message has no cut marker", None
    lost = sorted(f for f in cache.facts(task) if f not in text)
    if lost:
        return f"shortened task lost facts {lost[:5]}", first
    # Its facts must stay even when they alone do not fit in task_max_tokens.
    limit = task_max_tokens(cfg) + TASK_SLACK + sum(counter.count(f) + 2 for f in cache.facts(task))
    size = message_tokens(counter, first, fmt)
    if size > limit:
        return f"shortened task has {size} tokens, over task_max_tokens {task_max_tokens(cfg)} (+facts) {limit}", first
    return None, first


# -- the smallest legal context --------------------------------------------------------------------


def is_instruction(message: Any) -> bool:
    return role(message) in ("system", "developer") and not is_summary(message)


def last_block_start(messages: Sequence[Any], fmt: str) -> int:
    """Index where the smallest legal tail starts: the last message when it is user text or an
    assistant message, else the assistant message whose calls the trailing results answer; for
    Anthropic, when the pending loop (after the last user text) holds an assistant message that
    starts with thinking, back to the nearest one (DESIGN: the only legal cuts inside a thinking
    loop; with interleaved thinking the loop's first message need not start with it)."""
    n = len(messages)
    start = n - 1
    if fmt == "responses":
        return _responses.last_block_start(messages)
    if fmt == "openai":
        while start > 0 and role(messages[start]) == "tool":
            start -= 1
        return start
    if _gemini.is_gemini(messages[start]):
        # A user content holding function responses (with text or not) cannot go without its call.
        if _gemini.has_responses(messages[start]) and start > 0:
            start -= 1
    elif role(messages[start]) == "user" and not is_user_text(messages[start]) and start > 0:
        start -= 1
    loop = max((i for i, m in enumerate(messages) if is_user_text(m)), default=-1) + 1
    # With thinking on, the assistant turn that follows the summary must start with thinking, so a
    # cut in the pending loop lands just before an assistant message that starts with it.
    thinking = [i for i in range(loop, start + 1) if _starts_with_thinking(messages[i])]
    return thinking[-1] if thinking else start


def _starts_with_thinking(message: Any) -> bool:
    if _gemini.is_gemini(message):
        return _gemini.starts_with_thinking(message)
    blocks = _blocks(message)
    return role(message) == "assistant" and bool(blocks) and get(blocks[0], "type") in ("thinking", "redacted_thinking")


def _is_result(message: Any) -> bool:
    if _responses.item_type(message).endswith("_output"):
        return True
    return role(message) == "tool" or (role(message) == "user" and not is_user_text(message))


def smallest_legal_context(
    inp: Sequence[Any],
    result: Any,
    fmt: str,
    system: Any,
    tools: Any,
    counter: Any,
    cfg: Any,
    *,
    cap_summary: bool = True,
) -> int:
    """A close estimate (from below) of the smallest context DESIGN invariant 5 allows:

    system prompt and tool definitions (never changed) + system/developer messages of the list
    (never changed) + the task at ``min(its size, task_max_tokens)`` + the summary as returned,
    capped at ``summary_max_tokens`` (``NOMINAL_SUMMARY_TOKENS`` when none was made) + the
    smallest legal tail: the last message when it is user
    or assistant text, else the last tool block (the assistant message whole: thinking, signed
    and call blocks are never cut) with each result shortened to ``SHORT_RESULT_TOKENS``; inside
    an Anthropic pending loop with thinking the tail reaches back to the nearest assistant message
    that starts with thinking, earlier results of it cleared to ``SHORT_RESULT_TOKENS`` too. Every
    message adds the per-message overhead. Nothing else is required: the rest of the conversation
    may be summarised.
    """
    overhead = counter.message_overhead_tokens
    total = counter.count_messages([], system=system, tools=tools, format=fmt)
    total += sum(message_tokens(counter, m, fmt) + overhead for m in inp if is_instruction(m))
    ti = task_index(inp)
    if ti is not None:
        total += min(message_tokens(counter, inp[ti], fmt), task_max_tokens(cfg)) + overhead
    if result.summary:
        size = counter.count(result.summary)
        total += (min(size, cfg.summary_max_tokens) if cap_summary else size) + overhead
    else:
        total += min(NOMINAL_SUMMARY_TOKENS, cfg.summary_max_tokens) + overhead
    if inp:
        for i in range(last_block_start(inp, fmt), len(inp)):
            if i == ti or is_instruction(inp[i]):
                continue
            size = message_tokens(counter, inp[i], fmt)
            total += (min(size, SHORT_RESULT_TOKENS) if _is_result(inp[i]) else size) + overhead
    return total


# -- one compaction, checked -----------------------------------------------------------------------


@dataclass
class Check:
    """What the oracle found about one compaction. ``problems`` maps a kind to its details."""

    problems: dict[str, list[str]] = field(default_factory=dict)
    facts: FactCount = field(default_factory=FactCount)
    library_problems: int = 0
    tokens: int = 0
    task: Any = None

    def flag(self, kind: str, detail: str) -> None:
        self.problems.setdefault(kind, []).append(detail)


def snapshot(messages: Sequence[Any], system: Any, tools: Any) -> Any:
    return copy.deepcopy((list(messages), system, tools))


def check_compaction(
    inp: Sequence[Any],
    before: Any,
    result: Any,
    *,
    fmt: str,
    system: Any,
    tools: Any,
    cfg: Any,
    counter: Any,
    cache: FactCache,
    validate: Any,
    task: int | str | None = "first",
) -> Check:
    """Check one ``compact()`` result against every rule in the module docstring.

    ``before`` is :func:`snapshot` of the input taken before the call; ``validate`` is the
    library's ``validate_messages`` (counted on its own, as a second opinion). ``task`` is the
    task's index in ``inp`` (default: the first user message; ``None``: lost before this call,
    not checked). ``Check.task`` is the task as it is in the output (to follow it along a chain).
    """
    c = Check()
    out = result.messages
    out_system = result.system if result.system is not None else system
    if (list(inp), system, tools) != before:
        c.flag("mutated_input", "the input changed during compact()")
    c.library_problems = len(validate(out, format=fmt, system=out_system))
    if c.library_problems:
        c.flag("invalid_library", f"validate_messages: {c.library_problems} problems")
    for p in validity_problems(inp, out, fmt):
        c.flag("invalid_oracle", p)
    if fmt == "responses":
        for p in _responses.separated(inp, out):
            c.flag("reasoning_separated", p)
        for p in _responses.altered(inp, out):
            c.flag("opaque_altered", p)
    c.tokens = counter.count_messages(out, system=out_system, tools=tools, format=fmt)
    if c.tokens != result.tokens_after:
        c.flag("count_mismatch", f"recount {c.tokens} != tokens_after {result.tokens_after}")
    if max(c.tokens, result.tokens_after) > cfg.soft_threshold and not result.over_budget:
        kind = "over_window_unflagged" if c.tokens > cfg.budget else "over_soft_unflagged"
        c.flag(kind, f"{c.tokens} tokens > soft {cfg.soft_threshold} (budget {cfg.budget}), over_budget=False")
    ti = task_index(inp) if task == "first" else task
    problem, c.task = task_problem(inp, ti, result, fmt, counter, cfg, cache)  # type: ignore[arg-type]
    if problem:
        c.flag("task_missing", problem)
    if result.over_budget:
        bound = smallest_legal_context(inp, result, fmt, system, tools, counter, cfg)
        if bound < SMALLER_CONTEXT_MARGIN * cfg.soft_threshold:
            # DESIGN invariant 5 lets min_savings_ratio refuse below the hard threshold (and then
            # demands over_budget): counted apart, it is not a violation.
            reason = f"{result.over_budget_reason or ''} {getattr(result, 'reason', None) or ''}"
            refused = result.strategy == "none" and c.tokens <= cfg.hard_threshold and "min_savings" in reason
            uncapped = smallest_legal_context(inp, result, fmt, system, tools, counter, cfg, cap_summary=False)
            why = "" if uncapped < SMALLER_CONTEXT_MARGIN * cfg.soft_threshold else " once the summary is capped"
            c.flag(
                "refused_but_fits" if refused else "over_budget_but_fits",
                f"over_budget with {c.tokens} tokens ({result.strategy}), but a legal context of ~{bound} "
                f"fits soft {cfg.soft_threshold}{why}",
            )
    kept = {id(m) for m in out}
    named = {e.index for e in result.record}
    silent = [i for i, m in enumerate(inp) if id(m) not in kept and i not in named]
    if silent:
        c.flag("unrecorded_removal", f"input messages {silent[:8]} gone without a record entry")
    c.facts = fact_recall(inp, out, system, out_system, cache)
    return c
