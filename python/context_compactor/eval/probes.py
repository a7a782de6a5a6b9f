"""The eval's probes, read in Python from the raw transcript (no LLM, nothing from the Rust
summary code): the artifact trail, the user's constraints and what the agent must continue
with. Each returns what a compacted context should still show; :func:`present` and friends say
whether it does.

- **Artifact trail** (:func:`artifact_trail`): every file the agent created, edited, moved or
  deleted, in the order first touched, with its last operation. Read from edit/write/patch tool
  calls (``Write``, ``Edit``, ``str_replace_editor`` but not its ``view``, ``apply_patch``'s
  ``*** Add/Update/Delete File:`` and ``*** Move to:`` lines) and from shell commands (``>`` and
  ``>>`` redirections, ``tee``, ``sed -i``, ``touch``, ``cp``, ``mv``/``git mv``, ``rm``/``git rm``;
  heredoc bodies and quoted text are not commands).
- **Constraints** (:func:`constraints`, from :mod:`.instructions`): the sentences of the
  user's own messages that read as orders, to be kept verbatim.
- **Continuation** (:func:`continuation`): the open items of the latest plan or to-do list
  (``TodoWrite``, ``update_plan``, ``TaskCreate``/``TaskUpdate``, or ``- [ ]`` checkboxes in the
  agent's latest text that has them) and the last unresolved error (the last failing line of a
  tool result not followed by a clean run of the same command).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from context_compactor.eval.facts import get, role, text_of
from context_compactor.eval.instructions import constraints, is_instruction, normalize

__all__ = [
    "Artifact",
    "Continuation",
    "artifact_trail",
    "constraints",
    "continuation",
    "is_instruction",
    "normalize",
    "op_shown",
    "tool_calls",
]

#: Operations of the artifact trail.
CREATED, EDITED, MOVED, DELETED = "created", "edited", "moved", "deleted"

#: Words a line of a summary may use for each operation (English and Chinese).
OP_WORDS: dict[str, tuple[str, ...]] = {
    CREATED: ("creat", "new file", "wrote", "written", "write", "added", "add", "创建", "新建", "写入", "新增"),
    EDITED: ("edit", "modif", "updat", "chang", "patch", "wrote", "written", "write", "修改", "编辑", "更新", "写入"),
    MOVED: ("move", "renam", "→", "->", "移动", "重命名", "改名"),
    DELETED: ("delet", "remov", "删除", "移除"),
}


@dataclass(frozen=True)
class Call:
    """A tool call of the transcript: where, its id, tool name and parsed arguments."""

    index: int
    id: str
    name: str
    args: Any


@dataclass(frozen=True)
class Artifact:
    """A file of the artifact trail: its path, its last operation, the operations in order and
    the id of the call that made the last one."""

    path: str
    op: str
    ops: tuple[str, ...]
    call_id: str
    index: int


@dataclass(frozen=True)
class Continuation:
    """What the agent must go on with: the open to-do items and the last unresolved error."""

    todos: tuple[str, ...]
    error: str | None


def _parse_args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def tool_calls(messages: Sequence[Any]) -> Iterator[Call]:
    """Every tool call, OpenAI (``tool_calls``) and Anthropic (``tool_use`` blocks) alike."""
    for i, m in enumerate(messages):
        if role(m) != "assistant":
            continue
        for c in get(m, "tool_calls") or ():
            fn = get(c, "function") or get(c, "custom") or {}
            args = _parse_args(get(fn, "arguments", get(fn, "input")))
            yield Call(i, get(c, "id") or "", get(fn, "name") or "", args)
        content = get(m, "content")
        for b in content if isinstance(content, list) else ():
            if get(b, "type") in ("tool_use", "server_tool_use"):
                yield Call(i, get(b, "id") or "", get(b, "name") or "", _parse_args(get(b, "input")))


def tool_results(messages: Sequence[Any]) -> Iterator[tuple[int, str, str, bool]]:
    """Every tool result: (index, call id, text, is_error)."""
    for i, m in enumerate(messages):
        if role(m) == "tool":
            yield i, get(m, "tool_call_id") or "", _result_text(get(m, "content")), False
        content = get(m, "content")
        for b in content if isinstance(content, list) else ():
            if get(b, "type") == "tool_result":
                yield i, get(b, "tool_use_id") or "", _result_text(get(b, "content")), bool(get(b, "is_error"))


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(get(p, "text")) for p in content if isinstance(get(p, "text"), str))
    return ""


# -- artifact trail -----------------------------------------------------------------------------------------------

_PATH_KEYS = ("file_path", "path", "filename", "target_file", "notebook_path", "file")
_SHELL_KEYS = ("command", "cmd", "script", "commands")
_SHELL_TOOLS = re.compile(
    r"^(?:bash|sh|zsh|shell|terminal|execute_bash|run_terminal_cmd|run_shell|exec_command)$", re.I
)
_PATCH_LINE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)
_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_NOT_FILES = ("/dev/", "&")


def _shell_command(args: Any) -> str | None:
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        for k in _SHELL_KEYS:
            v = args.get(k)
            if isinstance(v, str):
                return v
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                if len(v) >= 3 and v[0] in ("bash", "sh", "zsh", "/bin/bash", "/bin/sh") and v[1].startswith("-"):
                    return " ".join(v[2:])
                return shlex.join(v)
    return None


def _clean_path(p: str) -> str | None:
    p = p.strip().strip("'\"")
    if not p or p.startswith(_NOT_FILES) or any(c in p for c in "$*?`(){}<>|;") or p.startswith("-"):
        return None
    if p.startswith("./") and len(p) > 2:
        p = p[2:]
    return p.rstrip("/") or None


def _command_lines(cmd: str) -> Iterator[str]:
    """The lines of a shell script that are commands (heredoc bodies skipped)."""
    lines = cmd.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        yield line
        m = _HEREDOC.search(line)
        i += 1
        if m:
            end = m.group(1)
            while i < len(lines) and lines[i].strip() != end:
                i += 1
            i += 1


def _simple_commands(line: str) -> Iterator[list[str]]:
    """The words of each simple command of a line (split at ``;``, ``&&``, ``||``, ``|``),
    redirection operators as their own words."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lex.whitespace_split = True
        words = list(lex)
    except ValueError:  # unbalanced quotes: not a command we can read
        return
    cur: list[str] = []
    for w in words:
        if w in (";", "&&", "||", "|", "&", ";;", "|&"):
            if cur:
                yield cur
            cur = []
        else:
            cur.append(w)
    if cur:
        yield cur


def shell_ops(cmd: str) -> Iterator[tuple[str, str, str | None]]:
    """(operation, path, moved-to path) of every file a shell command changes."""
    for line in _command_lines(cmd):
        for words in _simple_commands(line):
            # Redirections: `> f`, `>> f`, `2> f` (`>&`, `2>&1` and devices are not files).
            k = 0
            plain: list[str] = []
            while k < len(words):
                w = words[k]
                if w in (">", ">>", ">|") or (w.endswith(">") and w[:-1].isdigit()):
                    target = words[k + 1] if k + 1 < len(words) else ""
                    if target not in (">", "&") and not target.startswith("&"):
                        p = _clean_path(target)
                        if p:
                            yield (CREATED if w != ">>" else EDITED), p, None
                    k += 2
                    continue
                if w in ("<", "<<", "<<<", "<<-"):
                    k += 2
                    continue
                plain.append(w)
                k += 1
            if not plain:
                continue
            prog = plain[0].rsplit("/", 1)[-1]
            rest = plain[1:]
            if prog in ("sudo", "command", "exec", "time") and rest:
                prog, rest = rest[0].rsplit("/", 1)[-1], rest[1:]
            if prog == "git" and rest and rest[0] in ("mv", "rm"):
                prog, rest = rest[0], rest[1:]
            operands = [w for w in rest if not w.startswith("-")]
            if prog == "tee":
                for w in operands:
                    if p := _clean_path(w):
                        yield (EDITED if "-a" in rest else CREATED), p, None
            elif prog == "sed" and any(w.startswith("-i") or w == "--in-place" for w in rest):
                # sed -i [-e] SCRIPT FILE...: the script is the first operand unless -e gave it.
                files = operands if any(w in ("-e", "--expression") for w in rest) else operands[1:]
                if "-e" in rest:
                    files = operands[1:]
                for w in files:
                    if p := _clean_path(w):
                        yield EDITED, p, None
            elif prog == "touch":
                for w in operands:
                    if p := _clean_path(w):
                        yield CREATED, p, None
            elif prog == "cp" and len(operands) == 2:
                if p := _clean_path(operands[1]):
                    yield CREATED, p, None
            elif prog == "mv" and len(operands) == 2:
                a, b = _clean_path(operands[0]), _clean_path(operands[1])
                if a and b:
                    yield MOVED, a, b
            elif prog in ("rm", "unlink"):
                for w in operands:
                    if p := _clean_path(w):
                        yield DELETED, p, None


def _edit_ops(name: str, args: Any, seen: set[str]) -> Iterator[tuple[str, str, str | None]]:
    """(operation, path, moved-to path) of an edit/write/patch tool call."""
    n = name.lower()
    if isinstance(args, dict):
        patch = args.get("patch") or args.get("input") if n in ("apply_patch", "patch") else None
    else:
        patch = args if isinstance(args, str) and "*** " in args else None
    if isinstance(patch, str) or (n == "apply_patch" and isinstance(args, str)):
        text = patch if isinstance(patch, str) else str(args)
        last: str | None = None
        for m in _PATCH_LINE.finditer(text):
            kind, path, to = m.groups()
            if to and last:
                if p := _clean_path(to):
                    yield MOVED, last, p
                continue
            p = _clean_path(path or "")
            if not p:
                continue
            last = p
            yield {"Add": CREATED, "Update": EDITED, "Delete": DELETED}[kind], p, None
        return
    if not isinstance(args, dict):
        return
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    if path is None:
        return
    p = _clean_path(path)
    if not p:
        return
    command = args.get("command")
    if n in ("str_replace_editor", "str_replace_based_edit_tool", "edit_file", "editor", "file_editor"):
        if command == "create":
            yield CREATED, p, None
        elif command in ("str_replace", "insert", "undo_edit", "edit", "write", "append"):
            yield EDITED, p, None
    elif n in ("write", "write_file", "create_file", "create", "save_file"):
        yield (EDITED if p in seen else CREATED), p, None
    elif n in ("edit", "multiedit", "notebookedit", "str_replace", "insert", "edit_notebook", "replace", "append"):
        yield EDITED, p, None
    elif n in ("delete_file", "delete", "remove_file"):
        yield DELETED, p, None


def artifact_trail(messages: Sequence[Any]) -> list[Artifact]:
    """Every file the agent created, edited, moved or deleted, in the order first touched."""
    trail: dict[str, tuple[list[str], str, int]] = {}
    # Words of earlier calls' arguments: a file they named exists, so writing it edits it.
    seen: set[str] = set()
    # SWE-agent's editor: `edit`/`insert` without a path change the file `open`/`create` opened.
    open_file: str | None = None
    for call in tool_calls(messages):
        args = call.args
        name = call.name.lower()
        if name in ("open", "create", "goto_file") and isinstance(args, dict):
            p = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
            open_file = _clean_path(p) if p else open_file
            if name == "create" and open_file:
                args = {"path": open_file}
        elif (
            name in ("edit", "insert")
            and isinstance(args, dict)
            and open_file
            and not any(isinstance(args.get(k), str) for k in _PATH_KEYS)
        ):
            args = {**args, "path": open_file}
        if _SHELL_TOOLS.match(call.name):
            cmd = _shell_command(args)
            ops = list(shell_ops(cmd)) if cmd else []
        else:
            ops = list(_edit_ops(call.name, args, seen))
        ops = [(EDITED if op == CREATED and path in seen else op, path, to) for op, path, to in ops]
        for w in re.split(r"[\s'\"=]+", json.dumps(call.args) if not isinstance(call.args, str) else call.args):
            if c := _clean_path(w.strip(",;:")):
                seen.add(c)
        for op, path, to in ops:
            entry = trail.setdefault(path, ([], call.id, call.index))
            entry[0].append(op)
            trail[path] = (entry[0], call.id, call.index)
            if to is not None:
                dest = trail.setdefault(to, ([], call.id, call.index))
                dest[0].append(MOVED)
                trail[to] = (dest[0], call.id, call.index)
    return [Artifact(p, ops[-1], tuple(ops), cid, idx) for p, (ops, cid, idx) in trail.items()]


def op_shown(artifact: Artifact, context_text: str, call_ids: set[str]) -> bool:
    """Whether a context shows the file's last operation: the call that made it is still there,
    or a line names the path with a word for the operation."""
    if artifact.call_id and artifact.call_id in call_ids:
        return True
    words = OP_WORDS[artifact.op]
    for line in _lines_with(context_text, artifact.path):
        low = line.lower()
        if any(w in low for w in words):
            return True
    return False


def _lines_with(text: str, needle: str) -> Iterator[str]:
    start = 0
    while (i := text.find(needle, start)) >= 0:
        a = text.rfind("\n", 0, i) + 1
        b = text.find("\n", i)
        b = len(text) if b < 0 else b
        yield text[a:b]
        start = i + len(needle)


# -- continuation ---------------------------------------------------------------------------------------------------

_TODO_TOOLS = ("todowrite", "update_plan", "todo_write", "write_todos")
_DONE = ("completed", "complete", "done", "cancelled", "canceled", "deleted")
_CHECKBOX = re.compile(r"^\s*[-*]\s+\[ \]\s+(.+)$", re.M)
_FAILING = re.compile(
    r"^\s*(?:E\s+)?(?:(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b.*|error(?:\[\w+\])?:.*|fatal:.*"
    r"|FAILED\b.*|panic:.*|thread '.*' panicked at.*)$",
    re.M,
)
TODO_CHARS = 80


def _todo_text(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for k in ("content", "step", "subject", "title", "text", "description"):
        v = item.get(k)
        if isinstance(v, str) and v.strip():
            return normalize(v)[:TODO_CHARS]
    return None


def open_todos(messages: Sequence[Any]) -> tuple[str, ...]:
    """The open items of the latest plan or to-do list."""
    latest: tuple[int, tuple[str, ...]] | None = None
    tasks: dict[str, tuple[str, str]] = {}
    task_index = -1
    for call in tool_calls(messages):
        n = call.name.lower()
        args = call.args if isinstance(call.args, dict) else {}
        if n in _TODO_TOOLS:
            items = args.get("todos") or args.get("plan") or args.get("items") or []
            open_ = tuple(
                t
                for it in items
                if isinstance(it, dict) and str(it.get("status", "")).lower() not in _DONE
                for t in [_todo_text(it)]
                if t
            )
            latest = (call.index, open_)
        elif n == "taskcreate":
            text = _todo_text(args)
            if text:
                tasks[str(len(tasks) + 1)] = (text, "pending")
                task_index = call.index
        elif n == "taskupdate":
            tid = str(args.get("taskId") or args.get("id") or "")
            if tid in tasks and isinstance(args.get("status"), str):
                tasks[tid] = (tasks[tid][0], args["status"])
                task_index = call.index
    if tasks and (latest is None or task_index > latest[0]):
        latest = (task_index, tuple(t for t, s in tasks.values() if s.lower() not in _DONE))
    for i in range(len(messages) - 1, -1, -1):
        if latest is not None and i <= latest[0]:
            break
        m = messages[i]
        if role(m) == "assistant":
            boxes = _CHECKBOX.findall(text_of(m))
            if boxes:
                return tuple(normalize(b)[:TODO_CHARS] for b in boxes)
    return latest[1] if latest else ()


def last_unresolved_error(messages: Sequence[Any]) -> str | None:
    """The last failing line of a tool result, unless a later run of the same command (same tool
    and the same first words, or the same path) came back clean."""
    keys: dict[str, str] = {}
    for call in tool_calls(messages):
        cmd = _shell_command(call.args) if _SHELL_TOOLS.match(call.name) else None
        if cmd:
            key = " ".join(cmd.split()[:3])
        elif isinstance(call.args, dict):
            key = str(next((call.args[k] for k in _PATH_KEYS if k in call.args), ""))
        else:
            key = ""
        keys[call.id] = f"{call.name}\0{key}"
    error: tuple[str, str] | None = None
    for _, cid, text, is_error in tool_results(messages):
        lines = _FAILING.findall(text)
        key = keys.get(cid, "")
        if lines or is_error:
            line = lines[-1] if lines else next((x for x in text.splitlines() if x.strip()), "")
            line = normalize(line)[:120]
            if line:
                error = (key, line)
        elif error is not None and key == error[0]:
            error = None
    return error[1] if error else None


def continuation(messages: Sequence[Any]) -> Continuation:
    """The open to-do items and the last unresolved error of a transcript prefix."""
    return Continuation(open_todos(messages), last_unresolved_error(messages))
