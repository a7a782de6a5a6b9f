"""An independent check of one compaction, written from DESIGN.md and not from the library's code.

(One concern: the definitions below and one checker per definition, kept in one file so the whole
oracle can be read against DESIGN.md in one sitting; the facts' own rules live in
``context_compactor.eval.facts``.)

Nothing here calls the library's Rust fact extraction (``result.must_keep``, ``must_keep_missing``),
its structure analysis or its validator: the point is a second opinion. The library is used only
for what the check is *about*: ``TokenCounter`` (the counts the library promises to match) and,
as a separate count, ``validate_messages``; and for the facts, its pure-Python extractor
``context_compactor.eval.facts`` (see below).

Definitions used here
=====================

Text of a message, and the facts in it
    DESIGN's must-keep facts, read by ``context_compactor.eval.facts`` (its docstring spells the
    rules out, format by format). That module is pure Python written from DESIGN.md, never
    through ``_core``: it is the eval's second opinion on the Rust fact scanner, and this
    oracle's. Keeping one copy means a rule changed for the eval is the rule the tests check.

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
    marker ``…[N chars omitted]…``, holds every fact of the task, keeps its opening verbatim
    first, counts at least ``task_max_tokens`` (a floor, less ``TASK_SLACK``), and the result
    with the task put back verbatim would be over the soft threshold (it is cut only when it
    must be). Along a chain
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import _gemini
import _oracle_responses as _responses
from _messages import get, role
from context_compactor.eval.facts import (
    CUT_MARKER,
    SUMMARY_MARKER,
    fact_texts,
    facts_in_text,
    haystack,
    is_summary,
    string_values,
    text_of,
)

#: Characters of the task's opening a cut keeps verbatim first (DESIGN, "The task").
TASK_OPENING_CHARS = 300
#: Tokens a shortened task may exceed ``task_max_tokens`` by (the cut marker and rounding).
TASK_SLACK = 24
#: Tokens a shortened or cleared tool result is assumed to keep at least (marker or placeholder).
SHORT_RESULT_TOKENS = 16
#: A summary's size assumed in the smallest legal context when the result has none.
NOMINAL_SUMMARY_TOKENS = 100
#: An ``over_budget`` result is flagged when the smallest legal context is under this share of
#: the soft threshold (10% margin for what the bound cannot know exactly).
SMALLER_CONTEXT_MARGIN = 0.9

# -- facts -----------------------------------------------------------------------------------------


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


@dataclass
class FactCount:
    kept: int = 0
    total: int = 0
    lost: list[str] = field(default_factory=list)
    #: Lost facts the result names in ``must_keep_missing`` (evicted by the ledger's budget or the
    #: ladder, said so: DESIGN, "Nothing is lost silently").
    listed: int = 0

    def add(self, other: FactCount) -> None:
        self.kept += other.kept
        self.total += other.total
        self.lost += other.lost
        self.listed += other.listed


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


def fact_recall(
    inp: Sequence[Any],
    out: Sequence[Any],
    in_system: Any,
    out_system: Any,
    cache: FactCache,
    listed: Sequence[str] = (),
) -> FactCount:
    facts = removed_facts(inp, out, in_system, out_system, cache)
    if not facts:
        return FactCount()
    text = haystack(out, out_system)
    lost = sorted(f for f in facts if f not in text)
    named = set(listed)
    return FactCount(
        kept=len(facts) - len(lost), total=len(facts), lost=lost, listed=sum(1 for f in lost if f in named)
    )


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
    size = message_tokens(counter, first, fmt)
    # Shortened only when the result with the task verbatim would be over the soft threshold
    # (DESIGN, "The task"): put the original back and count (the system summary as returned).
    soft = getattr(cfg, "soft_threshold", None)
    if soft is not None and not result.over_budget:
        verbatim = result.tokens_after - size + message_tokens(counter, task, fmt)
        if verbatim <= soft:
            why = f"task shortened ({size} tokens), but with it verbatim the result is {verbatim} <= soft {soft}"
            return why, first
    # Cut by the least amount: never below task_max_tokens (a floor, not a target).
    # (Cuts are made in characters and counted in tokens: a cut lands within a few percent.)
    limit = min(message_tokens(counter, task, fmt), task_max_tokens(cfg))
    floor = int(limit * 0.95) - TASK_SLACK
    if size < floor:
        return f"shortened task has {size} tokens, under the floor task_max_tokens={task_max_tokens(cfg)}", first
    # Its opening stays verbatim first: the first 300 characters (or all the cut keeps of it).
    # What comes before the marker is the task's opening, verbatim; a shorter opening than
    # TASK_OPENING_CHARS means the cut had no room for more, so it kept no tail either.
    original, prose = text_of(task), text_of(first)
    head = CUT_MARKER.split(prose, maxsplit=1)[0]
    if not original.startswith(head):
        return f"shortened task does not start with its opening: {head[:60]!r}", first
    tail = original.rstrip()[-20:]
    # Along a chain the task may be one an earlier compaction cut: its opening is what comes
    # before its own marker (a cut again keeps that, and cannot keep more).
    opening = min(TASK_OPENING_CHARS, len(CUT_MARKER.split(original, maxsplit=1)[0]))
    short_opening = len(head) < 0.9 * opening and len(original) > 2 * TASK_OPENING_CHARS
    if short_opening and prose.rstrip().endswith(tail):
        return f"shortened task kept its tail but only {len(head)} characters of its opening", first
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
    c.facts = fact_recall(inp, out, system, out_system, cache, getattr(result, "must_keep_missing", ()))
    return c
