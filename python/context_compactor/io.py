"""Load real transcript files into a valid request, and save one.

These inputs are read:

- **OpenAI Chat Completions JSON**: a list of messages, or ``{"messages": [...], "tools": [...]}``.
- **Anthropic Messages JSON**: ``{"system": ..., "messages": [...], "tools": [...]}``, or a bare list
  (a bare list is Anthropic when it has ``tool_use``/``tool_result``/``thinking`` blocks, else OpenAI).
- **Claude Code session JSONL** (``~/.claude/projects/*/*.jsonl``): a log, not a request. It is
  rebuilt into the Anthropic request Claude Code would send next.
- **Codex CLI rollout JSONL** (``~/.codex/sessions/**/rollout-*.jsonl``, both the older bare-item
  layout and the current ``RolloutLine`` one): rebuilt into the Responses item list Codex would
  send next (``format="responses"``; see ``_codex.py`` for the rules).
- **OpenAI Responses request JSON**: ``{"input": [...items], "instructions": ..., "tools": [...]}``
  (``format="responses"``; ``_io_responses.py``). A bare list of Responses items is read too.
- **Gemini generateContent request JSON**: ``{"contents": [...], "system_instruction": ..., "tools":
  [...]}``, ``systemInstruction`` accepted (``format="gemini"``; ``_io_gemini.py``). A bare list
  of ``contents`` is read too.

:func:`save` writes each format in the request shape :func:`load` reads back (Responses items
and Gemini contents in the two request shapes above).

A JSONL file whose lines are plain messages (``{"role": ...}``) is read like a JSON list.

Design notes (Claude Code logs, from the files in the shared corpus and Claude Code's own
behaviour):

- One API message is written as one record per content block, all with the same ``message.id``;
  thinking blocks are records of their own. A parallel call's result is often written *between*
  two blocks of that message, and the results of parallel calls come in completion order, so a
  result may follow a later call. The loader therefore merges every assistant record into the
  message its ``message.id`` names (first position wins, exact duplicate blocks dropped, thinking
  moved first), collects every ``tool_result`` by ``tool_use_id``, and puts the results of a
  message's calls, in call order, into one user message right after it.
- ``parentUuid`` is not followed: the parallel-call records branch off the chain (the last
  result's parent is the assistant record of its own call), so walking the chain back from the
  leaf loses calls. File order is used instead.
- Only ``user`` and ``assistant`` records become messages. ``progress``,
  ``file-history-snapshot``, ``queue-operation``, ``pr-link``, ``attachment``, ``summary``
  (session titles) and every ``system`` record (hook summaries, turn durations, local command
  output, ``compact_boundary``, ``microcompact_boundary``) are UI or bookkeeping, never sent
  to the model; they are skipped and counted. So are sidechain records (sub-agents), records
  whose ``uuid`` was already seen, and synthetic API error messages (``isApiErrorMessage``).
- ``isMeta`` user records (the local-command caveat, skill and attachment injections) and the
  user records of local commands (``<command-name>...``) are sent to the model by Claude Code,
  so they are kept as user messages.
- A ``compact_boundary`` starts a new context: Claude Code sends only what follows it, with the
  earlier compaction's summary (the ``isCompactSummary`` user record) as the first user message.
  The loader does the same and counts the records before the last boundary as skipped.
- Repairs (each listed in :attr:`Transcript.repairs`): a call with no result anywhere gets a
  synthetic error result, unless it is the pending call of the very last message; a result whose
  call is nowhere is dropped; a repeated result or call id keeps its first occurrence; blank text
  blocks are dropped (the API rejects them); a log that starts with the assistant gets a short
  user message in front.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from context_compactor import _codex, _core, _io_gemini, _io_responses
from context_compactor._anthropic_to_openai import to_openai
from context_compactor._claude_code import MISSING_START_TEXT as MISSING_START_TEXT  # the log repairs' texts
from context_compactor._claude_code import NO_RESULT_TEXT as NO_RESULT_TEXT
from context_compactor._claude_code import rebuild_claude_code
from context_compactor._io_fields import FieldError
from context_compactor.errors import CompactorError

if TYPE_CHECKING:
    # The formats' names are declared once, in the stub (`_core.FORMATS` at run time).
    from context_compactor._core import _Format as Format

__all__ = ["Transcript", "TranscriptError", "load", "loads", "save"]

_FORMATS: tuple[str, ...] = _core.FORMATS

#: The formats whose request has a shape of its own (an object with ``input``, ``contents``, ...),
#: each with its module: ``is_request``/``read``/``write`` and ``TITLE``. A new format with a
#: request shape of its own is one entry here; OpenAI and Anthropic are this module's own shapes.
_REQUEST_FORMATS: dict[str, ModuleType] = {"responses": _io_responses, "gemini": _io_gemini}


def _names(names: Sequence[str]) -> str:
    """``'a', 'b' or 'c'``."""
    quoted = [repr(n) for n in names]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


# Record types a Claude Code session log is made of (any one of them marks a file as such a log).
_CLAUDE_CODE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "attachment",
        "pr-link",
        "custom-title",
    }
)


class TranscriptError(CompactorError, ValueError):
    """A transcript could not be read: malformed JSON, or not a shape this module knows.

    Attributes:
        line: 1-based line number of the fault (a JSONL record, or the JSON parser's position),
            ``None`` when the fault is not on one line.
        path: The file, when it was read by :func:`load`.
        field: The request field at fault (``"input[3]"``, ``"contents[2].parts"``,
            ``"system_instruction"``), ``None`` when the fault is not in one field.

    Example:
        >>> from context_compactor.io import loads, TranscriptError
        >>> try:
        ...     loads('{"type": "user", "message": {"role": "user", "content": "hi"}}\\n{oops')
        ... except TranscriptError as e:
        ...     print(e.line)
        2
    """

    def __init__(
        self, message: str, *, line: int | None = None, path: str | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.line = line
        self.path = path
        self.field = field

    def __reduce__(self) -> tuple[Any, ...]:  # picklable with its attributes (batch workers send it)
        return (_transcript_error, (str(self), self.line, self.path, self.field))


def _not_utf8(name: str) -> TranscriptError:
    """The error for a file that is not UTF-8, naming the first bad byte and its line (the text
    reader's own error gives an offset into its buffer and no file)."""
    with open(name, "rb") as f:
        data = f.read()
    line: int | None
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        where = f"byte 0x{data[e.start]:02x} on line {line} (offset {e.start})"
    else:  # the file changed under us; still say what the text reader found
        line, where = None, "a byte that is not UTF-8"
    return TranscriptError(
        f"{name} is not UTF-8 text: {where}; transcripts are UTF-8 JSON or JSONL", line=line, path=name
    )


def _transcript_error(message: str, line: int | None, path: str | None, field: str | None) -> TranscriptError:
    return TranscriptError(message, line=line, path=path, field=field)


@dataclass(frozen=True)
class Transcript:
    """A conversation read from a file, ready to send or to compact.

    Attributes:
        messages: The messages, as plain JSON dicts (fresh objects: yours to change); Responses
            items for a Codex rollout or a Responses request; Gemini ``contents`` for a Gemini request.
        format: ``"openai"``, ``"anthropic"``, ``"responses"`` (Codex rollouts, Responses requests)
            or ``"gemini"``.
        system: Anthropic's separate system prompt (``str`` or text blocks); a Codex session's
            instructions or a Responses request's ``instructions``; a Gemini request's
            ``system_instruction``; always ``None`` for OpenAI, whose system prompt stays in
            ``messages``.
        tools: The tool definitions the file carried, if any.
        source: What the file was: ``"openai_json"``, ``"anthropic_json"``, ``"claude_code_jsonl"``,
            ``"codex_jsonl"``, ``"responses_json"``, ``"gemini_json"``
            (``"openai_jsonl"``/``"anthropic_jsonl"`` for a JSONL file of plain messages).
        path: The file read, or ``None`` for :func:`loads`.
        skipped: Records or lines dropped (progress, snapshots, system records, sidechains,
            duplicates, records before the last compaction boundary, ...).
        repairs: What was changed to make the log a valid request, one readable line each
            (synthetic results, dropped orphan results, ...).

    Example:
        >>> t = loads('[{"role": "user", "content": "hi"}]')
        >>> t.format, t.source, len(t.messages)
        ('openai', 'openai_json', 1)
    """

    messages: list[dict[str, Any]]
    format: Format
    system: str | list[Any] | dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    source: str = ""
    path: str | None = None
    skipped: int = 0
    repairs: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"Transcript(format={self.format!r}, source={self.source!r}, messages={len(self.messages)}, "
            f"tools={None if self.tools is None else len(self.tools)}, path={self.path!r}, "
            f"skipped={self.skipped}, repairs={len(self.repairs)})"
        )


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str], *, format: Format | None = None) -> Transcript:
    """Read a transcript file: OpenAI JSON, Anthropic JSON, a Claude Code session JSONL, a Codex
    rollout JSONL, a Responses request JSON or a Gemini generateContent request JSON.

    Args:
        path: The file. A missing file raises ``FileNotFoundError``.
        format: Force the format. For a bare message list this overrides detection (the list is
            taken as it is). For an Anthropic request with a ``system`` key or a Claude Code log,
            ``"openai"`` converts the rebuilt request to OpenAI Chat Completions (thinking dropped,
            each result a ``tool`` message).

    Returns:
        The :class:`Transcript`. Claude Code logs come back as a valid Anthropic request.

    Raises:
        TranscriptError: Malformed JSON (with the line number), a malformed request field (with
            its ``field`` path), an unknown shape, or bytes that are not UTF-8.

    Example:
        >>> from context_compactor.io import load
        >>> t = load(claude_code_session)                   # ~/.claude/projects/<project>/<session>.jsonl
        >>> t.format, t.source, len(t.messages), t.skipped
        ('anthropic', 'claude_code_jsonl', 82, 203)
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8-sig") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise _not_utf8(name) from None
    try:
        t = _parse(text, format)
    except TranscriptError as e:
        e.path = name
        raise
    return Transcript(
        messages=t.messages,
        format=t.format,
        system=t.system,
        tools=t.tools,
        source=t.source,
        path=name,
        skipped=t.skipped,
        repairs=t.repairs,
    )


def loads(text: str, *, format: Format | None = None) -> Transcript:
    """Read a transcript from a string (JSON or JSONL); otherwise the same as :func:`load`.

    Example:
        >>> t = loads('{"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}')
        >>> t.format, t.system
        ('anthropic', 'Be brief.')
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    return _parse(text, format)


def save(
    path: str | os.PathLike[str],
    messages: Sequence[Any],
    *,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    format: Format | None = None,
) -> None:
    """Write a conversation as JSON that :func:`load` reads back, atomically.

    OpenAI is written as a bare list (``{"messages", "tools"}`` when there are tools; a ``system``
    string given here becomes a leading system message). Anthropic is written as
    ``{"system", "messages", "tools"}`` (``system`` always present, so the file reads back as
    Anthropic). Responses items are written as the request ``{"input", "instructions", "tools"}``
    (``system`` is the ``instructions``), Gemini contents as ``{"contents", "system_instruction",
    "tools"}`` (``system`` is the ``system_instruction``). SDK pydantic objects are written through
    their ``model_dump``; text is written as UTF-8 (CJK as it is, not ``\\u`` escapes). The file
    is written to a temporary file in the same folder and moved into place with ``os.replace``.

    Args:
        path: Where to write.
        messages: The messages (dicts or SDK objects).
        system: Anthropic's system prompt, the Responses ``instructions`` or Gemini's
            ``system_instruction``.
        tools: Tool definitions.
        format: ``"openai"``, ``"anthropic"``, ``"responses"`` or ``"gemini"``; detected from the
            messages when ``None`` (Responses items and Gemini contents by their shape; otherwise
            a ``system`` argument means Anthropic).

    Example:
        >>> save("out.json", [{"role": "user", "content": "hi"}], system="Be brief.")
        >>> load("out.json").system
        'Be brief.'
    """
    msgs = [_jsonable(m) for m in messages]
    tool_list = None if tools is None else [_jsonable(t) for t in tools]
    if format is not None and format not in _FORMATS:
        raise ValueError(f"format must be {_names(_FORMATS)}, not {format!r}")
    fmt: Format = format or _detect_request(msgs) or ("anthropic" if system is not None else _detect(msgs))
    data: Any
    if fmt in _REQUEST_FORMATS:
        data = _REQUEST_FORMATS[fmt].write(msgs, _jsonable(system), tool_list)
    elif fmt == "anthropic":
        data = {"system": _jsonable(system), "messages": msgs}
        if tool_list is not None:
            data["tools"] = tool_list
    elif fmt == "openai":
        if system is not None:
            msgs = [{"role": "system", "content": _jsonable(system)}, *msgs]
        data = msgs if tool_list is None else {"messages": msgs, "tools": tool_list}
    _write_atomic(os.fspath(path), json.dumps(data, ensure_ascii=False, indent=2, default=_jsonable) + "\n")


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _parse(text: str, format: Format | None) -> Transcript:
    if format is not None and format not in _FORMATS:
        raise ValueError(f"format must be {_names([*_FORMATS, 'None'])}, not {format!r}")
    if not text.strip():
        raise TranscriptError("the transcript is empty", line=1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if _first_line_is_object(text):
            return _from_jsonl(_jsonl_records(text), format)
        raise TranscriptError(f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}", line=e.lineno) from e
    if isinstance(data, dict) and _codex.is_rollout([(1, data)]):
        return _from_jsonl([(_first_content_line(text), data)], format)
    if isinstance(data, dict) and _is_claude_code_record(data):
        return _from_jsonl([(_first_content_line(text), data)], format)
    if any(m.is_request(data) for m in _REQUEST_FORMATS.values()):
        return _from_request(data, format)
    return _from_json(data, format)


def _from_request(data: dict[str, Any], format: Format | None) -> Transcript:
    """A request object of a format with a request shape of its own (``_REQUEST_FORMATS``)."""
    fmt = cast("Format", next(f for f, m in _REQUEST_FORMATS.items() if m.is_request(data)))
    module = _REQUEST_FORMATS[fmt]
    if format not in (None, fmt):
        raise TranscriptError(f"a {module.TITLE} request loads as format={fmt!r}; format={format!r} is not supported")
    try:
        messages, system, tools = module.read(data)
    except FieldError as e:
        raise TranscriptError(f"{module.TITLE} request: {e}", field=e.field) from e
    return Transcript(messages=messages, format=fmt, system=system, tools=tools, source=f"{fmt}_json")


def _core_detect(messages: list[Any]) -> Format | None:
    """The core's detection (DESIGN, Formats: ``_core.detect_format``, the one implementation of
    it), ``None`` for a list the core cannot read (left to the OpenAI/Anthropic path and its checks)."""
    try:
        return _core.detect_format(messages)
    except Exception:
        return None


def _detect_request(messages: list[Any]) -> Format | None:
    """A format with a request shape of its own (``"responses"``, ``"gemini"``) when the core's
    detection says so, else ``None``."""
    fmt = _core_detect(messages)
    return fmt if fmt in _REQUEST_FORMATS else None


def _first_content_line(text: str) -> int:
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            return n
    return 1


def _first_line_is_object(text: str) -> bool:
    for line in text.split("\n"):
        if line.strip():
            try:
                return isinstance(json.loads(line), dict)
            except json.JSONDecodeError:
                return False
    return False


def _jsonl_records(text: str) -> list[tuple[int, Any]]:
    # str.split, not splitlines: JSON strings may hold a raw U+2028, which splitlines breaks on.
    records = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            raise TranscriptError(f"malformed JSON on line {n}, column {e.colno}: {e.msg}", line=n) from e
    return records


def _is_claude_code_record(d: dict[str, Any]) -> bool:
    return d.get("type") in _CLAUDE_CODE_TYPES and "role" not in d and "messages" not in d


def _check_messages(messages: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise TranscriptError(f"{where} must be a list of messages, not {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TranscriptError(f"message {i} must be a JSON object, not {type(m).__name__}")
    return messages


def _from_json(data: Any, format: Format | None) -> Transcript:
    system: Any = None
    tools: Any = None
    explicit_anthropic = False
    if isinstance(data, list):
        messages = _check_messages(data, "the transcript")
    elif isinstance(data, dict) and "messages" in data:
        messages = _check_messages(data["messages"], '"messages"')
        tools = data.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise TranscriptError(f'"tools" must be a list, not {type(tools).__name__}')
        if "system" in data:
            explicit_anthropic = True
            system = data["system"]
            if system is not None and not isinstance(system, (str, list)):
                raise TranscriptError(f'"system" must be a string or a list of blocks, not {type(system).__name__}')
    else:
        raise TranscriptError(
            "not a transcript: expected a list of messages, an object with 'messages', 'input' (a Responses "
            "request) or 'contents' (a Gemini request), or JSONL records"
        )
    if isinstance(data, dict) and format in _REQUEST_FORMATS:
        raise TranscriptError(f"an object with 'messages' is OpenAI or Anthropic; format={format!r} is not supported")

    if isinstance(data, list) and (format is None or format in _REQUEST_FORMATS):
        kind = format or _detect_request(messages)
        if kind is not None:
            return Transcript(messages=messages, format=kind, tools=tools, source=f"{kind}_json")
    detected = _detect(messages)
    # Anthropic tool definitions carry ``input_schema``; OpenAI's are ``{"type": "function", ...}``.
    if explicit_anthropic or (tools and all(isinstance(t, dict) and "input_schema" in t for t in tools)):
        detected = "anthropic"

    if format == "openai" and explicit_anthropic:
        return Transcript(messages=to_openai(messages, system), format="openai", tools=tools, source="anthropic_json")
    fmt = format or detected
    if fmt == "openai":
        return Transcript(messages=messages, format="openai", tools=tools, source=f"{detected}_json")
    return Transcript(messages=messages, format="anthropic", system=system, tools=tools, source=f"{detected}_json")


def _detect(messages: list[Any]) -> Format:
    """``"anthropic"`` when the core detects Anthropic-only features (``tool_use``/``tool_result``/
    ``thinking``/``compaction`` blocks), else ``"openai"``."""
    return "anthropic" if _core_detect(messages) == "anthropic" else "openai"


def _from_jsonl(records: list[tuple[int, Any]], format: Format | None) -> Transcript:
    for n, r in records:
        if not isinstance(r, dict):
            raise TranscriptError(f"line {n} is not a JSON object", line=n)
    if _codex.is_rollout(records):
        return _from_codex(records, format)
    if records and all("role" in r and "message" not in r for _, r in records):
        t = _from_json([r for _, r in records], format)
        return Transcript(messages=t.messages, format=t.format, source=t.source.replace("_json", "_jsonl"))
    if not any(r.get("type") in _CLAUDE_CODE_TYPES for _, r in records):
        raise TranscriptError("not a Claude Code session log: no user, assistant or system records", line=records[0][0])
    messages, skipped, repairs = rebuild_claude_code(records)
    if format == "openai":
        return Transcript(
            messages=to_openai(messages),
            format="openai",
            source="claude_code_jsonl",
            skipped=skipped,
            repairs=repairs,
        )
    return Transcript(
        messages=messages, format="anthropic", source="claude_code_jsonl", skipped=skipped, repairs=repairs
    )


def _from_codex(records: list[tuple[int, Any]], format: Format | None) -> Transcript:
    if format not in (None, "responses"):
        raise TranscriptError(f"a Codex rollout loads as Responses items; format={format!r} is not supported")
    items, instructions, skipped, repairs = _codex.rebuild(records)
    return Transcript(
        messages=items,
        format="responses",
        system=instructions,
        source="codex_jsonl",
        skipped=skipped,
        repairs=repairs,
    )


def _jsonable(obj: Any) -> Any:
    """Dicts, lists and scalars as they are; SDK pydantic objects through ``model_dump``; bytes as
    URL-safe base64 text (what ``google-genai`` writes for a ``thought_signature``)."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    if isinstance(obj, (dict, list, str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, (bytes, bytearray)):  # a Gemini thought_signature in a dict: as the SDK dumps it
        return base64.urlsafe_b64encode(obj).decode("ascii")
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _write_atomic(path: str, text: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
