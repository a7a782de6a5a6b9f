"""The smallest legal context of a conversation, computed in Python from its messages alone
(independent of the planner it checks), and a replay of the corpus that holds every
``over_budget`` against it (DESIGN invariant 5).

The smallest legal context (DESIGN invariant 5) is the system prompt and tool definitions, the
system/developer messages of the list and pinned messages (never changed), the task (the first
user text message) at ``task_token_limit`` at most, the summary's narrative capped at
``summary_max_tokens`` (the ladder leaves it out down to its continuation floor, the last error
and the next to-do items, which goes only after the ledger's entries: counted within that cap
here) with the ledger's sentinel and only its prohibitions and safety rules (its minimum: the
ladder evicts every other entry first), and the last block of the conversation with everything
cuttable cut:

- the last block is everything after the last legal cut: a cut never splits a tool block (a call
  and its results), never lands inside Anthropic's pending thinking loop except just before an
  assistant message that opens with thinking, never separates a Responses ``reasoning`` item
  from the item after it, and never comes before the task;
- cuttable, each to ``KEEP_CHARS`` characters around a cut marker (arguments: each string value,
  the JSON kept): tool results (text ones), the arguments of calls whose result is in the
  conversation, the assistant's text; a cut tool result keeps its last error line, a cut
  argument or text keeps the must-keep facts (paths, URLs, error names, found by the eval's Python reader
  ``context_compactor.eval.facts``, not the core's) of what
  it removed after its marker, so their list is added to its floor;
- never cut: thinking and redacted thinking, Responses reasoning items and the item right after
  one, images, the user's own text, a message holding a call still waiting for its result.

The computation is an estimate, not exact: a cut list names the facts of the cut part only
(here: every fact of the part, by the eval's reader, not the core's), a shortened task
keeps its facts and the user's constraint sentences beyond ``task_max_tokens`` (here: not
counted), and the approximate counter does not add up exactly over pieces. So an
``over_budget`` result is accepted when this bound is at least ``MARGIN`` (90%) of the soft
threshold.

``python tests/_smallest.py [--full]`` replays the grid and prints each over-the-window call with
its bound; ``tests/test_smallest_context.py`` asserts on the default grid.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from context_compactor import CompactionConfig, ContextCompactor
from context_compactor.eval.facts import SUMMARY_MARKER, argument_values, facts_in_text
from context_compactor.io import Transcript, load
from context_compactor.replay import ReplayCall, replay

REPO = Path(__file__).resolve().parent.parent

#: Characters a cut keeps around its marker at the least (head + tail).
KEEP_CHARS = 40
#: An over_budget result is accepted when the bound is at least this share of the soft threshold.
MARGIN = 0.9
#: The default grid: absolute windows and a share of each conversation's own tokens.
WINDOWS: tuple[int | float, ...] = (1500, 2000, 3000, 0.1)
FULL_WINDOWS: tuple[int | float, ...] = (1000, 1500, 2000, 2500, 3000, 4000, 6000, 8000, 0.05, 0.1, 0.2, 0.3)


def corpus_dir() -> Path:
    return Path(os.environ.get("CORPUS_DIR") or REPO.parent / "shared" / "corpus")


def corpus_files() -> list[Path]:
    d = corpus_dir()
    return sorted([*d.glob("openai/*.json"), *d.glob("claude-code/*.jsonl"), *d.glob("responses/*.jsonl")])


# -- reading a message (dicts, as io.load returns them) --------------------------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def _role(m: Any) -> str | None:
    return _get(m, "role")


def _blocks(m: Any) -> list[Any]:
    c = _get(m, "content")
    if isinstance(c, list):
        return c
    return []


def _has_image(obj: Any) -> bool:
    if isinstance(obj, dict):
        if obj.get("type") in ("image", "image_url", "input_image"):
            return True
        return any(_has_image(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_image(v) for v in obj)
    return False


def _text_of(content: Any) -> str | None:
    """The text of a result's content (str or text parts); None when it holds something else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and not _has_image(content):
        texts = [_get(p, "text") for p in content]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    return None


def is_instruction(m: Any) -> bool:
    return _role(m) in ("system", "developer") and _get(m, "type") in (None, "message")


def is_user_text(m: Any, fmt: str) -> bool:
    if _role(m) != "user" or (fmt == "responses" and _get(m, "type") not in (None, "message")):
        return False
    c = _get(m, "content")
    if isinstance(c, str) or c is None:
        return True
    return any(_get(b, "type") != "tool_result" for b in c)


def calls(m: Any, fmt: str) -> list[tuple[str | None, str]]:
    """(id, arguments text) of each call the message makes."""
    if fmt == "responses":
        t = _get(m, "type")
        if t in ("function_call", "custom_tool_call"):
            args = _get(m, "arguments") if t == "function_call" else _get(m, "input")
            return [(_get(m, "call_id"), args if isinstance(args, str) else json.dumps(args))]
        if t and t.endswith("_call") and _get(m, "call_id"):
            return [(_get(m, "call_id"), "")]
        return []
    if _role(m) != "assistant":
        return []
    out = []
    for tc in _get(m, "tool_calls") or []:
        fn = _get(tc, "function") or {}
        out.append((_get(tc, "id"), _get(fn, "arguments") or ""))
    for b in _blocks(m):
        if _get(b, "type") == "tool_use":
            out.append((_get(b, "id"), json.dumps(_get(b, "input"), ensure_ascii=False)))
    return out


def result_ids(m: Any, fmt: str) -> list[str | None]:
    if fmt == "responses":
        t = _get(m, "type") or ""
        return [_get(m, "call_id")] if t.endswith("_output") else []
    if _role(m) in ("tool", "function"):
        return [_get(m, "tool_call_id")]
    return [_get(b, "tool_use_id") for b in _blocks(m) if _get(b, "type") == "tool_result"]


THINKING = ("thinking", "redacted_thinking")


def _starts_with_thinking(m: Any) -> bool:
    b = _blocks(m)
    return _role(m) == "assistant" and bool(b) and _get(b[0], "type") in THINKING


def _is_reasoning(m: Any) -> bool:
    return _get(m, "type") == "reasoning"


# -- the last legal cut ----------------------------------------------------------------------------


def legal_cuts(messages: Sequence[Any], fmt: str) -> list[bool]:
    """``ok[c]`` for each ``c`` in ``0..=n``: may the list be cut into ``[:c]`` and ``[c:]``."""
    n = len(messages)
    ok = [True] * (n + 1)
    # A call and its result on the same side. Results come right after their call, so a cut
    # between a call and its last result is what is illegal.
    where: dict[Any, int] = {}
    for i, m in enumerate(messages):
        for cid, _ in calls(m, fmt):
            where[cid] = i
    for j, m in enumerate(messages):
        for rid in result_ids(m, fmt):
            i = where.get(rid)
            if i is not None and i < j:
                for c in range(i + 1, j + 1):
                    ok[c] = False
    # A call still waiting at the end: the block runs to the end.
    answered = {r for m in messages for r in result_ids(m, fmt)}
    for cid, i in where.items():
        if cid not in answered:
            for c in range(i + 1, n):
                ok[c] = False
    # Anthropic's pending thinking loop: from the last assistant message that opens with thinking
    # to the end, when no user text follows it and the conversation does not end with a final
    # answer; inside it, only before an assistant message that opens with thinking.
    if fmt == "anthropic":
        start = None
        for i, m in enumerate(messages):
            if is_user_text(m, fmt):
                start = None
            elif start is None and _starts_with_thinking(m):
                start = i
        last = messages[-1] if messages else None
        final = last is not None and _role(last) == "assistant" and not calls(last, fmt)
        if start is not None and not final:
            for c in range(start + 1, n):
                if not _starts_with_thinking(messages[c]):
                    ok[c] = False
    if fmt == "responses":
        for c in range(1, n):
            if _is_reasoning(messages[c - 1]):
                ok[c] = False
    return ok


def task_index(messages: Sequence[Any], fmt: str) -> int | None:
    return next((i for i, m in enumerate(messages) if is_user_text(m, fmt)), None)


def last_block_start(messages: Sequence[Any], fmt: str) -> int:
    """The last legal cut before the end, after the task."""
    ok = legal_cuts(messages, fmt)
    t = task_index(messages, fmt)
    low = 0 if t is None else t + 1
    for c in range(len(messages) - 1, low - 1, -1):
        if ok[c]:
            return c
    return low


# -- the smallest legal context ---------------------------------------------------------------------


def _cuttable(m: Any, fmt: str, answered: set[Any], after_reasoning: bool) -> Iterator[tuple[str, str]]:
    """(kind, text) of each part of ``m`` the last block's cut may shorten."""
    if after_reasoning or any(cid not in answered for cid, _ in calls(m, fmt)):
        return
    if fmt == "responses":
        t = _get(m, "type")
        if t == "function_call_output":
            text = _text_of(_get(m, "output"))
            if text is not None:
                yield "result", text
        elif t in ("function_call", "custom_tool_call"):
            for cid, args in calls(m, fmt):
                if cid in answered:
                    yield "args", args
        elif t in (None, "message") and _role(m) == "assistant":
            for p in _blocks(m):
                if _get(p, "type") == "output_text":
                    yield "text", _get(p, "text") or ""
        return
    role = _role(m)
    if role in ("tool", "function"):
        text = _text_of(_get(m, "content"))
        if text is not None:
            yield "result", text
        return
    if role == "assistant":
        c = _get(m, "content")
        if isinstance(c, str):
            yield "text", c
        blocks = _blocks(m)
        # Nothing up to a message's last thinking block is cut (its signature covers it).
        last = max((k for k, b in enumerate(blocks) if _get(b, "type") in THINKING), default=-1)
        for b in blocks[last + 1 :]:
            if _get(b, "type") == "text":
                yield "text", _get(b, "text") or ""
            elif _get(b, "type") == "tool_use" and _get(b, "id") in answered:
                yield "args", json.dumps(_get(b, "input"), ensure_ascii=False)
        for tc in _get(m, "tool_calls") or []:
            if _get(tc, "id") in answered:
                yield "args", _get(_get(tc, "function") or {}, "arguments") or ""
        return
    for b in _blocks(m):
        if _get(b, "type") == "tool_result":
            text = _text_of(_get(b, "content"))
            if text is not None:
                yield "result", text


def cut_around(text: str, keep: int = KEEP_CHARS) -> str:
    """``text`` cut to ``keep`` characters around a marker (as short as a cut gets)."""
    if len(text) <= keep:
        return text
    h = keep // 2
    return f"{text[:h]}…[{len(text) - keep} chars omitted]…{text[len(text) - (keep - h) :]}"


def _cut_values(value: Any) -> Any:
    if isinstance(value, str):
        return cut_around(value)
    if isinstance(value, dict):
        return {k: _cut_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_values(v) for v in value]
    return value


#: A line of tool output that reports a failure (broader than the core's reader: an estimate).
_ERROR_LINE = re.compile(r"error|exception|fail|fatal|panic", re.I)


def floor(kind: str, text: str, counter: Any) -> int:
    """Tokens a part keeps when cut as far as it goes: ``KEEP_CHARS`` characters around the
    marker (arguments: each string value so, the JSON kept), and for arguments and text the
    list of their facts."""
    if kind == "args":
        try:
            short = json.dumps(_cut_values(json.loads(text)), ensure_ascii=False)
        except ValueError:
            short = cut_around(text)
    else:
        short = cut_around(text)
    n = counter.count(short)
    if kind == "result":
        # A cut of tool output keeps its last error line after the marker (the last unresolved
        # error stays in the kept tail): here the last line that names an error or a failure.
        errors = [x.strip() for x in text.splitlines() if _ERROR_LINE.search(x)]
        return n + (counter.count(f" (cut part's last error: {errors[-1][:160]}) ") if errors else 0)
    values = list(argument_values(text)) if kind == "args" else [text]
    facts = list(dict.fromkeys(f for v in values for f in facts_in_text(v)))
    return n + (counter.count(" (cut part mentions: " + ", ".join(facts) + ") ") if facts else 0)


@dataclass
class Bound:
    """The smallest legal context, by part (tokens of the configured counter)."""

    system: int = 0
    task: int = 0
    summary: int = 0
    last_block: int = 0
    block_range: tuple[int, int] = (0, 0)

    @property
    def total(self) -> int:
        return self.system + self.task + self.summary + self.last_block

    def __str__(self) -> str:
        a, b = self.block_range
        return (
            f"{self.total} = system/tools {self.system} + task {self.task} + summary {self.summary}"
            f" + last block (messages {a}-{b}) {self.last_block}"
        )


#: The ledger's sentinel line (DESIGN, "The ledger"), as a reader sees it in the summary.
LEDGER_SENTINEL = "[context-compactor ledger"
#: Prohibitions and safety rules: the ledger's minimum, which the ladder never evicts. Read here
#: with this file's own words, not the core's classifier (a narrower list only makes the bound
#: smaller, the check stricter).
_PROHIBITION = re.compile(r"(?i)\b(?:don['’]t|do not|never|must not|mustn't)\b|不要|禁止|不能|绝不|不许|不准|别")


def summary_floor(summary: str, summary_max_tokens: int, counter: Any) -> int:
    """The smallest a summary message gets: its narrative at most ``summary_max_tokens``, then the
    ledger's sentinel and only its prohibitions and safety rules (DESIGN invariant 5)."""
    at = summary.rfind(LEDGER_SENTINEL)
    if at < 0:
        return min(counter.count(summary), summary_max_tokens)
    narrative, ledger = summary[:at], summary[at:]
    lines = ledger.splitlines()
    minimum = [lines[0]] + [ln for ln in lines[1:] if ln.startswith("> ") and _PROHIBITION.search(ln)]
    return min(counter.count(narrative), summary_max_tokens) + counter.count("\n".join(minimum))


def smallest_legal_context(
    messages: Sequence[Any],
    fmt: str,
    system: Any,
    tools: Any,
    compactor: ContextCompactor,
    summary: str | None,
) -> Bound:
    """The bound for ``messages`` (see the module docstring); ``summary`` is the summary text
    the compaction made (``None``: none was made)."""
    cfg = compactor.config
    counter = compactor.counter
    overhead = counter.message_overhead_tokens
    each = counter.count_each(messages, system=system, tools=tools, format=fmt)
    sizes = list(each.messages)
    b = Bound(system=each.system + each.tools)
    b.system += sum(sizes[i] for i, m in enumerate(messages) if is_instruction(m))
    t = task_index(messages, fmt)
    if t is not None:
        b.task = min(sizes[t], cfg.task_token_limit + overhead)
    if summary:
        b.summary = summary_floor(summary, cfg.summary_max_tokens, counter) + overhead
    start = last_block_start(messages, fmt)
    b.block_range = (start, len(messages) - 1)
    answered = {r for m in messages for r in result_ids(m, fmt)}
    for i in range(start, len(messages)):
        m = messages[i]
        if i == t or is_instruction(m):
            continue
        after = fmt == "responses" and i > 0 and _is_reasoning(messages[i - 1])
        size = sizes[i]
        for kind, text in _cuttable(m, fmt, answered, after):
            size -= max(0, counter.count(text) - floor(kind, text, counter))
        b.last_block += max(size, overhead)
    return b


# -- the replay --------------------------------------------------------------------------------------


@dataclass
class Finding:
    file: str
    window: int
    message_index: int
    tokens: int
    budget: int
    soft: int
    over_budget: bool
    bound: Bound | None
    reason: str | None

    def __str__(self) -> str:
        return (
            f"{self.file} window {self.window} call at {self.message_index}: {self.tokens} tokens "
            f"(budget {self.budget}, soft {self.soft}), over_budget={self.over_budget}, "
            f"smallest legal context {self.bound}; reason: {self.reason}"
        )


@dataclass
class Outcome:
    calls: int = 0
    over_window: list[Finding] = field(default_factory=list)
    #: A context over the window without over_budget (never allowed).
    unflagged: list[Finding] = field(default_factory=list)
    #: over_budget while the smallest legal context fits under MARGIN x soft.
    too_early: list[Finding] = field(default_factory=list)
    #: Contexts a provider would reject for a rule the transcript itself did not break there
    #: (``validate_messages``, as ``replay`` checks each call; "over_window" aside).
    invalid: list[str] = field(default_factory=list)


def window_of(transcript: Transcript, w: int | float) -> int:
    if isinstance(w, int):
        return w
    from context_compactor.eval import _window

    counter = ContextCompactor(CompactionConfig()).counter
    total = counter.count_messages(
        transcript.messages, system=transcript.system, tools=transcript.tools, format=transcript.format
    )
    return _window(total, None, w)


def _summary_in(messages: Sequence[Any]) -> str | None:
    for m in messages:
        c = _get(m, "content")
        texts = [c] if isinstance(c, str) else [_get(b, "text") for b in _blocks(m)]
        for t in texts:
            if isinstance(t, str) and t.lstrip().startswith(SUMMARY_MARKER):
                return t
    return None


def check_replay(path: Path, transcript: Transcript, window: int, out: Outcome) -> None:
    """Replay ``transcript`` at ``window`` and check every model call (see the module docstring)."""
    compactor = ContextCompactor(CompactionConfig(max_context_tokens=window))
    cfg = compactor.config
    fmt = transcript.format
    calls: list[ReplayCall] = []
    report = replay(transcript, compactor, on_call=calls.append)
    for turn in report.turns:
        rules = [p for p in turn.problems if "over_window" not in p]
        if rules and not turn.inherited:
            out.invalid.append(f"{path.name} window {window} call at {turn.message_index}: {rules[:3]}")
    for call in calls:
        out.calls += 1
        r = call.result
        # prepare() may answer over_budget without changing anything (nothing it may cut): the
        # call then has no result, its turn says over_budget.
        over = report.turns[call.turn].over_budget
        over_window = call.tokens > cfg.budget
        if not over_window and not over:
            continue
        # A min_savings_ratio refusal below the hard threshold is allowed (DESIGN invariant 5).
        refused = r is not None and r.strategy == "none" and call.tokens <= cfg.hard_threshold
        bound = None
        if over:
            prefix = transcript.messages[: call.message_index]
            # The summary this compaction made, else the earlier one the context holds.
            summary = r.summary if r is not None and r.summary else _summary_in(call.messages)
            bound = smallest_legal_context(prefix, fmt, transcript.system, transcript.tools, compactor, summary)
        f = Finding(
            path.name,
            window,
            call.message_index,
            call.tokens,
            cfg.budget,
            cfg.soft_threshold,
            over,
            bound,
            r.over_budget_reason if r is not None else None,
        )
        if over_window:
            out.over_window.append(f)
            if not over:
                out.unflagged.append(f)
        if over and not refused and bound is not None and bound.total < MARGIN * cfg.soft_threshold:
            out.too_early.append(f)


def run_grid(windows: Sequence[int | float], files: Sequence[Path] | None = None) -> Outcome:
    out = Outcome()
    for path in files if files is not None else corpus_files():
        transcript = load(path)
        for w in windows:
            check_replay(path, transcript, window_of(transcript, w), out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--full", action="store_true", help=f"windows {FULL_WINDOWS} (default {WINDOWS})")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every over-the-window call")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = run_grid(FULL_WINDOWS if args.full else WINDOWS)
    if args.verbose:
        for f in out.over_window:
            print(f)
    print(f"{out.calls} model calls, {len(out.over_window)} over the window")
    for f in out.unflagged:
        print("OVER THE WINDOW WITHOUT over_budget:", f)
    for f in out.too_early:
        print("over_budget WITH A SMALLER LEGAL CONTEXT:", f)
    for x in out.invalid:
        print("INVALID FOR THE PROVIDER:", x)
    print(f"{time.perf_counter() - t0:.1f} s")
    return 1 if out.unflagged or out.too_early or out.invalid else 0


if __name__ == "__main__":
    sys.exit(main())
