"""Pure-Python reference implementations the benchmarks compare the Rust core against.

Each one does the SAME work as the library, written the way a careful Python programmer would
(standard library only, no extension of ours), and is checked to give identical results
(`bench_compact.py` and `bench_tokens.py` assert it before timing):

* :func:`estimate` is the rule of `src/tokens/estimate.rs` with the weights read from that
  file. It is not the per-code-point loop of `fit_estimate.reference_estimate` (kept for the
  fit, ~40x slower again): every feature is computed with C-level passes over the whole text.
  The text becomes one byte per code point whose value is a class bit (`bytes.translate`; CJK
  and other non-ASCII code points are mapped first with two `re.sub`), that byte string becomes
  one big integer, and each count is an AND / shift / `int.bit_count()` over it: a run of class
  X starts where X's bit is set and the previous byte's is not (`x & ~(x << 8)`).
* :func:`message_tokens` / :func:`count_total` frame each message as `src/tokens/counter.rs`
  does for OpenAI Chat Completions dicts (the corpus's format): 4 tokens a message, the estimate
  of each text, 3 + name + arguments for each tool call, `image_tokens` per image.
* :class:`CachedCounter` is the best a Python user could do for the "after one append" case:
  per-message counts cached under a key of the message's content (role, texts, call names and
  arguments; CPython caches each string's hash, so a lookup does not rescan the text).
* :func:`micro_compact` is `src/planner/micro.rs`'s micro-compaction for OpenAI dicts: the kept
  head and recent tail at legal cut points (never inside a tool block), tool results older than
  the last `keep_recent_tool_results` replaced by the same placeholder, long arguments of old
  calls cut with `cut_json_args`'s rule (JSON stays valid, longest string values cut to one
  common length), and the pass dropped when it frees under `clear_at_least_tokens`. It skips
  what the library does before micro-compaction (validation and repair of invalid input) and
  records nothing: the input here is valid, so the output is the same.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_estimate import FEATURES, rust_weights

# ---------------------------------------------------------------------------------------------
# The estimate
# ---------------------------------------------------------------------------------------------

_W = dict(zip(FEATURES, rust_weights(), strict=True))
_SCALE = 1024

# One bit per class in the class byte of each code point.
LOWER, UPPER, DIGIT, PUNCT, SPACE, NEWLINE, CJK, OTHER = (1 << i for i in range(8))
_CJK_MARK, _OTHER_MARK = "\x80", "\x81"


def _class_table() -> bytes:
    table = bytearray(256)
    for b in range(256):
        c = chr(b)
        if "a" <= c <= "z":
            table[b] = LOWER
        elif "A" <= c <= "Z":
            table[b] = UPPER
        elif "0" <= c <= "9":
            table[b] = DIGIT
        elif c in " \t\x0b\x0c":
            table[b] = SPACE
        elif c in "\n\r":
            table[b] = NEWLINE
        elif b < 0x80:
            table[b] = PUNCT
        else:
            table[b] = OTHER
    table[ord(_CJK_MARK)] = CJK
    return bytes(table)


_CLASS = _class_table()
_CJK_RANGES = "\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
# Non-ASCII code points that are not CJK ("other"); lone surrogates included.
_OTHER_RE = re.compile(f"[^\\x00-\\x7f{_CJK_RANGES}]")
# After _OTHER_RE, every code point above \x81 is CJK.
_CJK_RE = re.compile("[^\\x00-\\x81]")
_ASTRAL_OTHER_RE = re.compile("[\U00010000-\U0001ffff\U00040000-\U0010ffff]")


_U_TO_L = bytes(LOWER if b == UPPER else b for b in range(256))
_LOWER_UPPER = bytes([LOWER, UPPER])
_BYTES = {c: bytes([c]) for c in (LOWER, UPPER, DIGIT, PUNCT, SPACE, NEWLINE, CJK, OTHER)}


def estimate(text: str) -> int:
    """`estimate_tokens(text)`, computed in Python (identical result)."""
    n = len(text)
    if n == 0:
        return 0
    astral = 0
    if text.isascii():
        raw = text.encode("ascii")
    else:
        astral = len(_ASTRAL_OTHER_RE.findall(text))
        raw = _CJK_RE.sub(_CJK_MARK, _OTHER_RE.sub(_OTHER_MARK, text)).encode("latin-1")
    cls = raw.translate(_CLASS)
    b = _BYTES
    # Letters form one class for runs (a word), upper-case letters being letters too.
    v = int.from_bytes(cls.translate(_U_TO_L), "little")
    prev = v << 8
    same = v & prev
    # Each class's bit is set where a run of it starts (the previous byte has another class)...
    starts = (v ^ same).to_bytes(n, "little")
    # ... and where a run reaches its second code point (for runs of two or more spaces).
    second = (same ^ (same & (prev << 8))).to_bytes(n, "little")
    w = _W
    total = (
        w["n_lower"] * cls.count(b[LOWER])
        + w["n_upper"] * cls.count(b[UPPER])
        + w["n_digit"] * cls.count(b[DIGIT])
        + w["n_punct"] * cls.count(b[PUNCT])
        + w["n_space"] * cls.count(b[SPACE])
        + w["n_newline"] * cls.count(b[NEWLINE])
        + w["n_cjk"] * cls.count(b[CJK])
        + w["n_other"] * cls.count(b[OTHER])
        # A word also starts at an upper-case letter after a lower-case one (camelCase).
        + w["r_word"] * (starts.count(b[LOWER]) + cls.count(_LOWER_UPPER))
        + w["r_digit"] * starts.count(b[DIGIT])
        + w["r_punct"] * starts.count(b[PUNCT])
        + w["r_space2"] * second.count(b[SPACE])
        + w["r_newline"] * starts.count(b[NEWLINE])
        + w["r_cjk"] * starts.count(b[CJK])
        + w["r_other"] * starts.count(b[OTHER])
        + w["n_backslash"] * text.count("\\")
        + w["n_astral"] * astral
    )
    return (total + _SCALE - 1) // _SCALE


# ---------------------------------------------------------------------------------------------
# Counting messages (src/tokens/counter.rs, OpenAI Chat Completions dicts)
# ---------------------------------------------------------------------------------------------

MESSAGE_OVERHEAD = 4
CALL_OVERHEAD = 3
IMAGE_TOKENS = 1600
_IMAGE_TYPES = frozenset({"image_url", "image", "input_image", "input_audio"})
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})

#: The core's count of each image whose size it reads from the header (``image_url`` data URLs of
#: the corpus), by URL: filled before timing by :func:`learn_images` (untimed), so the baseline
#: counts the same tokens by a dict lookup instead of reading headers, which favours it. Any
#: other image is ``IMAGE_TOKENS``, as in the core when the size is unknown.
IMAGE_COUNTS: dict[str, int] = {}


def _image_url(part: dict[str, Any]) -> str | None:
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, dict) else url
    return url if isinstance(url, str) else None


def learn_images(convs: Sequence[Sequence[dict[str, Any]]]) -> None:
    """Record the core's count of every ``image_url`` part of ``convs`` in :data:`IMAGE_COUNTS`."""
    from context_compactor import ContextCompactor

    comp = ContextCompactor()
    for conv in convs:
        for m in conv:
            content = m.get("content")
            for part in content if isinstance(content, list) else ():
                url = _image_url(part) if part.get("type") == "image_url" else None
                if url is not None and url not in IMAGE_COUNTS:
                    one = comp.check([{"role": "user", "content": [part]}]).raw_tokens
                    IMAGE_COUNTS[url] = one - MESSAGE_OVERHEAD


def _image_tokens(part: dict[str, Any]) -> int:
    url = _image_url(part) if part.get("type") == "image_url" else None
    return IMAGE_COUNTS.get(url, IMAGE_TOKENS) if url is not None else IMAGE_TOKENS


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return estimate(content)
    tokens = 0
    if isinstance(content, list):
        for part in content:
            kind = part.get("type")
            if kind in _TEXT_TYPES:
                tokens += estimate(part.get("text") or "")
            elif kind == "refusal":
                tokens += estimate(part.get("refusal") or "")
            elif kind in _IMAGE_TYPES:
                tokens += _image_tokens(part)
    return tokens


def message_tokens(m: dict[str, Any]) -> int:
    """Tokens of one OpenAI message, as `counter::message_tokens` counts them."""
    tokens = MESSAGE_OVERHEAD + _content_tokens(m.get("content"))
    refusal = m.get("refusal")
    if isinstance(refusal, str):
        tokens += estimate(refusal)
    for call in m.get("tool_calls") or ():
        f = call["function"]
        tokens += CALL_OVERHEAD + estimate(f.get("name") or "") + estimate(f.get("arguments") or "")
    return tokens


def count_total(messages: Sequence[dict[str, Any]]) -> int:
    """Tokens of a whole message list (no separate system prompt or tools)."""
    return sum(map(message_tokens, messages))


@dataclass(frozen=True)
class Check:
    """What `ContextCompactor.check` decides, computed in Python."""

    tokens: int
    urgency: str


def check(messages: Sequence[dict[str, Any]], soft: int, hard: int, counter: Any = None) -> Check:
    """`ContextCompactor.check(messages)` in Python: count everything, compare with the thresholds."""
    tokens = count_total(messages) if counter is None else counter.total(messages)
    return Check(tokens, "hard" if tokens >= hard else "soft" if tokens >= soft else "none")


def _key(m: dict[str, Any]) -> tuple[Any, ...]:
    content = m.get("content")
    if isinstance(content, list):
        content = tuple(tuple(sorted((k, v) for k, v in p.items() if isinstance(v, str))) for p in content)
    calls = tuple((c["function"].get("name"), c["function"].get("arguments")) for c in m.get("tool_calls") or ())
    return (m.get("role"), content, m.get("refusal"), calls)


class CachedCounter:
    """Per-message counts cached under a content key (what a Python user could write).

    Like the library's `ConversationState` it cannot serve a stale count after an in-place edit
    (the key is the content); unlike it, the key tuple is rebuilt for every message on every
    call, and nothing is ever evicted.
    """

    def __init__(self) -> None:
        self.cache: dict[tuple[Any, ...], int] = {}
        self.misses = 0

    def total(self, messages: Sequence[dict[str, Any]]) -> int:
        cache = self.cache
        total = 0
        for m in messages:
            k = _key(m)
            n = cache.get(k)
            if n is None:
                n = cache[k] = message_tokens(m)
                self.misses += 1
            total += n
        return total


# ---------------------------------------------------------------------------------------------
# Cutting text (src/summary/text.rs)
# ---------------------------------------------------------------------------------------------

PLACEHOLDER_PREFIX = "[context-compactor:"
SUMMARY_MARKER = "[context-compactor summary]"  # written out: this module uses no extension of ours
_CUT_RE = re.compile("…\\[[0-9]+ chars omitted\\]…")
_MARKER_FIXED_CHARS = 18
_JSON_MIN_KEEP = 40


def is_cut(text: str) -> bool:
    return _CUT_RE.search(text) is not None


def already_compacted(text: str) -> bool:
    return text.startswith(PLACEHOLDER_PREFIX) or is_cut(text)


def head_tail(text: str, max_chars: int) -> str | None:
    """`text` cut to head + `…[N chars omitted]…` + tail within `max_chars` (text.rs `head_tail`)."""
    n = len(text)
    if n <= max_chars or is_cut(text):
        return None
    keep = max(max_chars - (_MARKER_FIXED_CHARS + len(str(n))), 2)
    h, t = keep - keep // 2, keep // 2
    if h + t >= n:
        return None
    head, tail = text[:h], text[n - t :]
    dropped = 0
    i = head.rfind("\n")
    if i >= 0:
        after = len(head) - i - 1
        if after > 0 and after * 5 <= h:
            dropped += after
            head = head[: i + 1]
    i = tail.find("\n")
    if i > 0 and i * 5 <= t:
        dropped += i
        tail = tail[i:]
    return f"{head}…[{n - h - t + dropped} chars omitted]…{tail}"


_JSON_WS = " \t\n\x0c\r"


def _json_strings(args: str) -> list[tuple[int, int, bool, bool]] | None:
    """(start, end, is_key, escaped) of every string literal, or None when not valid JSON."""
    try:
        json.loads(args)
    except ValueError:
        return None
    out = []
    n = len(args)
    i = args.find('"')
    while 0 <= i < n:
        start = i
        escaped = False
        i += 1
        while i < n and args[i] != '"':
            if args[i] == "\\":
                escaped = True
                i += 1
            i += 1
        end = min(i + 1, n)
        j = end
        while j < n and args[j] in _JSON_WS:
            j += 1
        out.append((start, end, j < n and args[j] == ":", escaped))
        i = args.find('"', end)
    return out


def _dumps(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


_PATH_KEYS = ("file_path", "path", "filename", "target_file", "notebook_path", "file")
_PATH_MAX_CHARS = 260


def _is_path_value(args: str, key: tuple[int, int, bool, bool], raw: str) -> bool:
    """Whether `raw` (a string literal) is one path under a path key (cut.rs `is_one_path`)."""
    try:
        name, value = json.loads(args[key[0] : key[1]]), json.loads(raw)
    except ValueError:
        return False
    return name in _PATH_KEYS and 0 < len(value) <= _PATH_MAX_CHARS and not any(c.isspace() for c in value)


def cut_json_args(args: str, max_chars: int) -> str | None:
    """Tool-call arguments over `max_chars` cut to fit (text.rs `cut_json_args`)."""
    total = len(args)
    if total <= max_chars:
        return None
    spans = _json_strings(args)
    if spans is None:
        return head_tail(args, max_chars)
    cands = []
    for k, (start, end, is_key, escaped) in enumerate(spans):
        if is_key:
            continue
        raw = args[start:end]
        if k > 0 and spans[k - 1][2] and _is_path_value(args, spans[k - 1], raw):
            continue  # the path a call works on stays whole
        if end - start <= _JSON_MIN_KEEP and len(raw.encode("utf-8")) <= _JSON_MIN_KEEP:
            continue
        if escaped:
            try:
                v = json.loads(raw)
            except ValueError:
                v = raw[1:-1]
        else:
            v = raw[1:-1]
        if len(v) > _JSON_MIN_KEEP and not is_cut(v):
            cands.append((start, end, v, len(v), len(raw)))
    if not cands:
        return None

    def cut(v: str, limit: int) -> str | None:
        c = head_tail(v, limit)
        return None if c is None else _dumps(c)

    def size(limit: int) -> int:
        t = total
        for _, _, v, n, enc in cands:
            if n > limit:
                c = cut(v, limit)
                if c is not None:
                    t = t - enc + len(c)
        return t

    lo, hi = _JSON_MIN_KEEP, max(c[3] for c in cands)
    if size(lo) <= max_chars:
        while lo + 1 < hi:
            mid = lo + (hi - lo) // 2
            if size(mid) <= max_chars:
                lo = mid
            else:
                hi = mid
    parts = []
    at = 0
    for start, end, v, n, _ in cands:
        if n <= lo:
            continue
        c = cut(v, lo)
        if c is not None:
            parts.append(args[at:start])
            parts.append(c)
            at = end
    if not parts:
        return None
    parts.append(args[at:])
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# Micro-compaction (src/planner/micro.rs, OpenAI dicts)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MicroConfig:
    """The `CompactionConfig` fields micro-compaction reads (same defaults)."""

    keep_first_messages: int = 1
    keep_recent_messages: int = 6
    keep_recent_tool_results: int = 4
    max_tool_arg_chars: int = 500
    clear_at_least_tokens: int = 2_000
    protected_tools: tuple[str, ...] = ()
    hard_tokens: int = 120_000  # the hard threshold (a long failing output is not kept whole)


def _is_result(m: dict[str, Any]) -> bool:
    return m.get("role") in ("tool", "function")


def cut_points(messages: Sequence[dict[str, Any]]) -> set[int]:
    """Indices c where messages[:c] / messages[c:] splits no tool block (structure.rs)."""
    n = len(messages)
    inside: set[int] = set()
    i = 0
    while i < n:
        m = messages[i]
        if m.get("role") == "assistant" and m.get("tool_calls"):
            j = i + 1
            while j < n and _is_result(messages[j]):
                j += 1
            inside.update(range(i + 1, j))
            i = j
        else:
            i += 1
    return {c for c in range(n + 1) if c not in inside}


def _first_text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list) and c and isinstance(c[0], dict):
        return c[0].get("text") or ""
    return ""


def _is_summary(m: dict[str, Any]) -> bool:
    return _first_text(m).lstrip().startswith(SUMMARY_MARKER)


def _is_instruction(m: dict[str, Any]) -> bool:
    return m.get("role") in ("system", "developer")


def head_and_tail(messages: Sequence[dict[str, Any]], cfg: MicroConfig) -> tuple[int, int]:
    n = len(messages)
    legal = cut_points(messages)
    head_end = taken = 0
    while head_end < n and taken < cfg.keep_first_messages:
        if _is_summary(messages[head_end]):
            break
        if not _is_instruction(messages[head_end]):
            taken += 1
        head_end += 1
    while head_end < n and head_end not in legal:
        head_end += 1
    tail_start = max(n - cfg.keep_recent_messages, 0)
    while tail_start > 0 and tail_start not in legal:
        tail_start -= 1
    return head_end, max(tail_start, head_end)


def _result_text(m: dict[str, Any]) -> tuple[str, int, int]:
    """A result's text (parts joined by newlines), its tokens and its images."""
    c = m.get("content")
    if isinstance(c, str):
        return c, estimate(c), 0
    texts, images = [], 0
    for part in c or ():
        if part.get("type") in _TEXT_TYPES:
            texts.append(part.get("text") or "")
        elif part.get("type") in _IMAGE_TYPES:
            images += 1
    return "\n".join(texts), sum(map(estimate, texts)) + images * IMAGE_TOKENS, images


_TODO_TOOLS = frozenset({"todowrite", "todo_write", "update_plan", "write_todos"})
_FAIL_STARTS = (
    "error:", "error[", "error ", "fatal:", "fatal error", "panic:", "failed", "fail:", "npm err!",
    "exception:", "exception in", "caused by:", "segmentation fault", "assertion failed", "uncaught",
)  # fmt: skip
_ERROR_NAMES = frozenset({"KeyboardInterrupt", "SystemExit", "StopIteration", "StopAsyncIteration", "GeneratorExit"})
_NO_RESULT = "(no result was recorded for this tool call)"
_PATH_ARGS = ("path", "file_path", "filename", "file", "filePath")


def _word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _is_error_name(name: str) -> bool:
    if not name or not ("A" <= name[0] <= "Z") or not all(map(_word, name)):
        return False
    suffixes = ("Error", "Exception", "Warning")
    return name in _ERROR_NAMES or any(len(name) > len(s) and name.endswith(s) for s in suffixes)


def _failing(line: str) -> bool:
    """Whether a line of tool output reports a failure (tools.rs `failing_line`)."""
    t = line.strip()
    if t.startswith("E "):
        t = t[2:].lstrip()
    if len(t.encode()) < 5 or not (t[0].isascii() and t[0].isalpha()):
        return False
    low = t[:20].lower()
    if any(low.startswith(p) for p in _FAIL_STARTS) or (t.startswith("thread ") and "panicked at" in t):
        return True
    end = next((k for k, c in enumerate(t[:121]) if not (_word(c) or c == ".")), None)
    if end is None or t[end] != ":":
        return False
    name = t[:end]
    return _is_error_name(name.rsplit(".", 1)[-1]) and all(name.split("."))


def _is_shell_tool(name: str) -> bool:
    n = name.lower()
    return (
        n in ("sh", "zsh", "cmd", "run", "exec", "execute", "powershell", "pwsh")
        or any(k in n for k in ("bash", "shell", "terminal", "command", "_cmd", "exec_"))
        or n.startswith(("run_", "execute_"))
    )


def _shell_command(args: str) -> str | None:
    try:
        v = json.loads(args)
    except ValueError:
        return args.strip() or None
    if isinstance(v, dict):
        v = next((v[k] for k in ("command", "cmd", "script", "commands", "code") if k in v), None)
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts = [x for x in v if isinstance(x, str)]
        if len(parts) >= 2 and parts[0] in ("bash", "sh", "zsh", "/bin/bash", "/bin/sh") and parts[1].startswith("-"):
            parts = parts[2:]
        return " ".join(parts) or None
    return None


def _call_key(name: str, args: str) -> str:
    if _is_shell_tool(name) and (cmd := _shell_command(args)) is not None:
        return name + "\0" + " ".join(cmd.split()[:3])
    try:
        v = json.loads(args)
    except ValueError:
        v = None
    path = ""
    if isinstance(v, dict):
        path = next((v[k] for k in _PATH_ARGS if isinstance(v.get(k), str)), "")
    return name + "\0" + path


def live_messages(messages: Sequence[dict[str, Any]], max_chars: int) -> set[int]:
    """The messages micro-compaction leaves whole (continuation.rs `live_messages`): the latest
    to-do list call, and the last unresolved error's result (at most `max_chars`) with its call."""
    out: set[int] = set()
    todo = error_done = False
    later: list[tuple[str, bool]] = []
    failing: tuple[str, int] | None = None
    keys: dict[str, str] = {}
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        for call in m.get("tool_calls") or () if m.get("role") == "assistant" else ():
            f = call.get("function") or {}
            name = f.get("name") or "tool"
            if not todo and name.lower() in _TODO_TOOLS:
                todo = True
                out.add(i)
            cid = call.get("id")
            if not error_done and cid is not None:
                keys[cid] = _call_key(name, f.get("arguments") or "")
                if failing is not None and failing[0] == cid:
                    key = keys[cid]
                    if not any(not bad and keys.get(lid) == key for lid, bad in later):
                        out.update((i, failing[1]))
                    error_done = True
        if _is_result(m) and not error_done and failing is None:
            text = _result_text(m)[0]
            if text.strip() != _NO_RESULT:
                bad = any(map(_failing, text.splitlines()))
                rid = m.get("tool_call_id") if m.get("role") == "tool" else None
                if bad and len(text.encode()) > max_chars:
                    error_done = True
                elif bad and rid is not None:
                    failing = (rid, i)
                elif bad:
                    out.add(i)
                    error_done = True
                elif rid is not None:
                    later.append((rid, False))
        if todo and error_done:
            break
    return out


def micro_compact(messages: Sequence[dict[str, Any]], cfg: MicroConfig | None = None) -> list[dict[str, Any]]:
    """The library's `micro_compact` for OpenAI dicts, in Python. Returns a new list; the input
    is not modified (edited messages are copies, the others the same objects)."""
    cfg = cfg or MicroConfig()
    n = len(messages)
    tokens = [message_tokens(m) for m in messages]
    head_end, tail_start = head_and_tail(messages, cfg)
    frozen = [_is_instruction(m) or _is_summary(m) for m in messages]
    for i in live_messages(messages, max(cfg.hard_tokens // 20, 200) * 4):
        frozen[i] = True
    for i in list(range(head_end)) + list(range(min(max(tail_start, head_end), n), n)):
        frozen[i] = True
    names = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            if call.get("id") is not None and call["function"].get("name") is not None:
                names[call["id"]] = call["function"]["name"]
    results = [i for i, m in enumerate(messages) if _is_result(m)]
    keep_from = max(len(results) - cfg.keep_recent_tool_results, 0)
    old_ids = {messages[i].get("tool_call_id") for i in results[:keep_from]} - {None}
    protected = set(cfg.protected_tools)

    out = list(messages)
    changed = saved = 0
    for i in results[:keep_from]:
        if frozen[i]:
            continue
        m = out[i]
        name = (m.get("name") if m.get("role") == "function" else None) or names.get(m.get("tool_call_id"), "a tool")
        if name in protected:
            continue
        text, result_tokens, _ = _result_text(m)
        if already_compacted(text):
            continue
        placeholder = f"{PLACEHOLDER_PREFIX} output of {name} cleared, {len(text)} chars / ~{result_tokens} tokens]"
        if estimate(placeholder) + 8 >= result_tokens:
            continue
        edited = {**m, "content": placeholder}
        after = message_tokens(edited)
        out[i] = edited
        saved += max(tokens[i] - after, 0)
        tokens[i] = after
        changed += 1
    for i, m in enumerate(out):
        if frozen[i] or m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        calls = None
        for k, call in enumerate(m["tool_calls"]):
            f = call["function"]
            if call.get("id") not in old_ids or (f.get("name") or "") in protected:
                continue
            args = f.get("arguments") or ""
            if len(args) <= cfg.max_tool_arg_chars or already_compacted(args):
                continue
            cut = cut_json_args(args, cfg.max_tool_arg_chars)
            if cut is None:
                continue
            if calls is None:
                calls = list(m["tool_calls"])
            calls[k] = {**call, "function": {**f, "arguments": cut}}
            changed += 1
        if calls is not None:
            edited = {**m, "tool_calls": calls}
            after = message_tokens(edited)
            out[i] = edited
            saved += max(tokens[i] - after, 0)
            tokens[i] = after
    if changed == 0 or saved < cfg.clear_at_least_tokens:
        return list(messages)
    return out
