"""The user-side sweep: every shared conversation compacted over a grid, each result checked by the
independent oracle in ``tests/_oracle.py``.

Over 600 lines on purpose: it is also a command-line tool (``make sweep``), and the grid, the
tally, the three kinds of run (whole, prefixes, chains) and the report read as one page.

Grid (``--full``): the 28 corpus conversations (22 OpenAI files; 6 Claude Code sessions loaded as
Anthropic requests with their thinking blocks) x budgets of 5, 10, 20, 30, 50 and 80% of each
conversation's own token count (``max_context_tokens`` = budget + ``reserve_tokens``, the reserve
set explicitly to a quarter of the budget) x ``keep_recent_messages`` 2 and 6 x ``summary_role``
"user" and "system" x the built-in rule summary and a fake LLM summarizer (a fixed ~600-character
English paraphrase with no path, URL or error name), in three modes:

- ``whole``: the whole conversation, ``compact(force=True)`` and ``compact()``;
- ``prefix``: prefixes ending where an agent calls the model (after a user message or a tool
  result), spread over the conversation; ``compact()`` when ``check()`` says it is due, else
  ``compact(force=True)``;
- ``chain``: from an early prefix, compact, append the next transcript messages to the
  *compacted* list (as an agent does), compact again when ``check()`` says it is due — or forced
  when the transcript would end first — up to ``chain_length`` compactions, each one checked.

``python tests/sweep.py [--full] [--json out.json] [--jobs N]`` prints the counts; without
``--full`` it runs the CI subset that ``tests/test_sweep.py`` asserts on. Over 600 lines: a
script (the grid, the runner, the report), not a test module.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _oracle as oracle
from _messages import get, role
from _responses import to_responses
from context_compactor import ContextCompactor, TokenCounter, validate_messages
from context_compactor.eval import facts as fact_rules
from context_compactor.io import load

REPO = Path(__file__).resolve().parent.parent

#: The fake LLM summary: ~600 characters of paraphrase, no path, URL or error name.
LLM_SUMMARY = (
    "<summary>\n"
    "The user asked the assistant to look into a problem in their project and to make a careful "
    "change. The assistant read several source files, ran the tests and a few shell commands, and "
    "studied the output to understand what was going on. It found the part of the code that was "
    "responsible, proposed a change, applied an edit and ran the checks again; most of them now "
    "pass. Some questions are still open: whether the change covers every case the user cares "
    "about and whether the documentation should be updated as well. Next steps: confirm the "
    "change with the user, run the remaining checks, and report the outcome in plain words.\n"
    "</summary>"
)


def fake_llm(request: Any) -> str:
    return LLM_SUMMARY


SUMMARIZERS = {"rule": None, "llm": fake_llm}

#: Violation kinds, in the order the table prints them, with their labels.
KINDS = {
    "exception": "exceptions",
    "invalid_library": "invalid outputs (validate_messages)",
    "invalid_oracle": "invalid outputs (oracle)",
    "over_soft_unflagged": "over soft threshold (under window), no over_budget",
    "over_window_unflagged": "over the window, no over_budget",
    "task_missing": "outputs without the task (whole or faithfully shortened)",
    "mutated_input": "mutated inputs",
    "count_mismatch": "count mismatches (recount != tokens_after)",
    "over_budget_but_fits": "over_budget with a smaller legal context",
    "unrecorded_removal": "messages gone without a record entry",
    "reasoning_separated": "Responses reasoning items separated from their item",
    "opaque_altered": "Responses opaque items altered (not the input object)",
}
#: Counted and shown, not violations: a min_savings_ratio refusal between the soft and the hard
#: threshold with over_budget set is allowed by DESIGN invariant 5, even when a smaller context exists.
INFO = {"refused_but_fits": "min_savings refusals (over_budget) with a smaller legal context"}


@dataclass(frozen=True)
class Grid:
    shares: tuple[float, ...]
    keeps: tuple[int, ...]
    roles: tuple[str, ...]
    summarizers: tuple[str, ...]
    prefixes: int
    chain_length: int
    whole_modes: tuple[bool, ...] = (True, False)  # force=True, force=False


FULL = Grid(
    shares=(0.05, 0.1, 0.2, 0.3, 0.5, 0.8),
    keeps=(2, 6),
    roles=("user", "system"),
    summarizers=("rule", "llm"),
    prefixes=4,
    chain_length=10,
)
CI = Grid(
    shares=(0.1, 0.3), keeps=(2, 6), roles=("user", "system"), summarizers=("rule", "llm"), prefixes=2, chain_length=3
)


# -- the corpus ------------------------------------------------------------------------------------


def corpus_dir() -> Path:
    """``$CORPUS_DIR`` or ``../shared/corpus`` next to the repository (as tests/conftest.py)."""
    return Path(os.environ.get("CORPUS_DIR") or REPO.parent / "shared" / "corpus")


@dataclass
class Case:
    name: str
    fmt: str
    messages: list[Any]
    system: Any
    tools: Any


def load_cases(root: Path | None = None, *, responses: bool = False) -> list[Case]:
    """The corpus; ``responses=True``: its OpenAI conversations converted to Responses items
    (``tests/_responses.py``, reasoning items synthesized before some calls) instead."""
    root = root or corpus_dir()
    if responses:
        return [
            Case(path.name, "responses", to_responses(json.loads(path.read_text(encoding="utf-8"))), None, None)
            for path in sorted((root / "openai").glob("*.json"))
        ]
    cases = []
    for path in sorted((root / "openai").glob("*.json")):
        cases.append(Case(path.name, "openai", json.loads(path.read_text(encoding="utf-8")), None, None))
    for path in sorted((root / "claude-code").glob("*.jsonl")):
        t = load(path)
        cases.append(Case(path.name, t.format, list(t.messages), t.system, t.tools))
    return cases


def call_points(messages: Sequence[Any], fmt: str) -> list[int]:
    """Prefix lengths ending where an agent calls the model: after a user message (Anthropic tool
    results are user messages) or after the last result of a tool block."""
    points = []
    for p in range(1, len(messages) + 1):
        last = messages[p - 1]
        nxt = messages[p] if p < len(messages) else None
        if fmt == "responses":
            output = str(get(last, "type") or "").endswith("_output")
            if (output and (nxt is None or not str(get(nxt, "type") or "").endswith("_output"))) or (
                role(last) == "user"
            ):
                points.append(p)
            continue
        if fmt == "openai" and role(last) == "tool":
            if nxt is None or role(nxt) != "tool":
                points.append(p)
        elif role(last) == "user":
            points.append(p)
    return points


def spread(points: Sequence[int], k: int) -> list[int]:
    """``k`` points spread over ``points`` (not the last: that is the whole conversation)."""
    inner = list(points[:-1]) if len(points) > 1 else []
    if not inner:
        return []
    picked = {inner[min(len(inner) - 1, (len(inner) * (i + 1)) // (k + 1))] for i in range(k)}
    return sorted(picked)


# -- tallies ---------------------------------------------------------------------------------------


def pct(kept: int, total: int) -> str:
    return f"{100 * kept / total:.1f}%" if total else "-"


@dataclass
class Tally:
    compactions: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    by_mode: dict[str, dict[str, int]] = field(default_factory=dict)
    by_format: dict[str, dict[str, int]] = field(default_factory=dict)
    #: kind -> a short class of the detail (for the task: its record entries and over_budget) -> n
    by_detail: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    facts: dict[str, list[int]] = field(default_factory=dict)  # "share/summarizer" -> [kept, total]
    file_facts: dict[str, list[int]] = field(default_factory=dict)  # "file/summarizer" -> [kept, total]
    facts_listed: dict[str, int] = field(default_factory=dict)  # "share/summarizer" -> lost but listed
    lost: dict[str, list[str]] = field(default_factory=dict)  # file -> example lost facts
    #: Lost facts: fact -> n, where the fact came from -> n, and what the library said of it -> n.
    lost_facts: dict[str, int] = field(default_factory=dict)
    lost_sources: dict[str, int] = field(default_factory=dict)
    lost_why: dict[str, int] = field(default_factory=dict)
    lost_examples: dict[str, dict[str, Any]] = field(default_factory=dict)  # fact -> its first loss
    over_budget: int = 0
    fallbacks: int = 0
    library_problems: int = 0
    chains: int = 0
    chains_lost_task: int = 0
    seconds: float = 0.0

    def add_count(self, kind: str, mode: str, example: dict[str, Any], detail: str | None = None) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        for table, key in (
            (self.by_mode, mode),
            (self.by_format, example["format"]),
            (self.by_detail, detail),
        ):
            if key is not None:
                row = table.setdefault(kind, {})
                row[key] = row.get(key, 0) + 1
        examples = self.examples.setdefault(kind, [])
        seen = {(e["file"], e["mode"]) for e in examples}
        if len(examples) < 6 and (example["file"], example["mode"]) not in seen:
            examples.append(example)

    def add_facts(self, ctx: Context, facts: oracle.FactCount) -> None:
        for key, table in (
            (f"{ctx.share:g}/{ctx.summarizer}", self.facts),
            (f"{ctx.case.name}/{ctx.summarizer}", self.file_facts),
        ):
            row = table.setdefault(key, [0, 0])
            row[0] += facts.kept
            row[1] += facts.total
        key = f"{ctx.share:g}/{ctx.summarizer}"
        self.facts_listed[key] = self.facts_listed.get(key, 0) + facts.listed
        if facts.lost:
            bucket = self.lost.setdefault(ctx.case.name, [])
            for f in facts.lost:
                if f not in bucket and len(bucket) < 8:
                    bucket.append(f)

    def merge(self, other: Tally) -> None:
        self.compactions += other.compactions
        for kind, n in other.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        for mine_table, theirs_table in (
            (self.by_mode, other.by_mode),
            (self.by_format, other.by_format),
            (self.by_detail, other.by_detail),
        ):
            for kind, row in theirs_table.items():
                mine = mine_table.setdefault(kind, {})
                for key, n in row.items():
                    mine[key] = mine.get(key, 0) + n
        for kind, examples in other.examples.items():
            mine_ex = self.examples.setdefault(kind, [])
            for e in examples:
                if len(mine_ex) < 6 and e["file"] not in {x["file"] for x in mine_ex}:
                    mine_ex.append(e)
        for table, theirs in ((self.facts, other.facts), (self.file_facts, other.file_facts)):
            for key, (kept, total) in theirs.items():
                row = table.setdefault(key, [0, 0])
                row[0] += kept
                row[1] += total
        for key, n in other.facts_listed.items():
            self.facts_listed[key] = self.facts_listed.get(key, 0) + n
        for name, facts in other.lost.items():
            self.lost.setdefault(name, []).extend(f for f in facts if f not in self.lost.get(name, []))
        for mine, theirs in (
            (self.lost_facts, other.lost_facts),
            (self.lost_sources, other.lost_sources),
            (self.lost_why, other.lost_why),
        ):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        for fact, example in other.lost_examples.items():
            self.lost_examples.setdefault(fact, example)
        self.over_budget += other.over_budget
        self.fallbacks += other.fallbacks
        self.library_problems += other.library_problems
        self.chains += other.chains
        self.chains_lost_task += other.chains_lost_task

    def recall(
        self, share: float | None = None, summarizer: str | None = None, *, listed: bool = False
    ) -> tuple[int, int]:
        """(kept, total) facts; ``listed``: lost facts the result named in ``must_keep_missing``
        count as kept (accounted for)."""
        kept = total = 0
        for key, (k, t) in self.facts.items():
            s, name = key.split("/")
            if (share is None or float(s) == share) and (summarizer is None or name == summarizer):
                kept += k + (self.facts_listed.get(key, 0) if listed else 0)
                total += t
        return kept, total

    def to_json(self) -> dict[str, Any]:
        return {
            "compactions": self.compactions,
            "counts": {k: self.counts.get(k, 0) for k in KINDS | INFO},
            "by_mode": self.by_mode,
            "by_format": self.by_format,
            "by_detail": self.by_detail,
            "over_budget": self.over_budget,
            "fallbacks": self.fallbacks,
            "library_problems": self.library_problems,
            "chains": self.chains,
            "chains_lost_task": self.chains_lost_task,
            "facts": self.facts,
            "file_facts": self.file_facts,
            "facts_listed": self.facts_listed,
            "lost": self.lost,
            "lost_facts": dict(sorted(self.lost_facts.items(), key=lambda x: -x[1])),
            "lost_sources": self.lost_sources,
            "lost_why": self.lost_why,
            "lost_examples": self.lost_examples,
            "examples": self.examples,
            "seconds": round(self.seconds, 1),
        }


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Context:
    case: Case
    share: float
    keep: int
    summary_role: str
    summarizer: str
    compactor: ContextCompactor
    counter: TokenCounter
    cache: oracle.FactCache
    tally: Tally
    #: What validates an output (a framework sweep validates the framework's own objects).
    validate: Any = validate_messages

    def label(self, mode: str) -> dict[str, Any]:
        return {
            "file": self.case.name,
            "format": self.case.fmt,
            "window": f"{self.share:.0%}",
            "keep": self.keep,
            "summary_role": self.summary_role,
            "summarizer": self.summarizer,
            "mode": mode,
            "budget": self.compactor.config.budget,
            "soft": self.compactor.config.soft_threshold,
        }


def make_compactor(size: int, share: float, keep: int, summary_role: str, summarizer: str) -> ContextCompactor:
    """The budget (``max_context_tokens - reserve_tokens``) is ``share`` of the conversation."""
    budget = max(1, round(size * share))
    reserve = max(1, budget // 4)
    return ContextCompactor(
        max_context_tokens=budget + reserve,
        reserve_tokens=reserve,
        keep_recent_messages=keep,
        summary_role=summary_role,
        tokenizer="approx",
        summarizer=SUMMARIZERS[summarizer],
    )


def compact_checked(
    ctx: Context, messages: list[Any], system: Any, mode: str, *, force: bool | None, task: Any = "first"
) -> tuple[Any, oracle.Check | None]:
    """One compaction, checked by the oracle; ``force=None`` means: when ``check()`` says it is due,
    else forced. ``task``: the task's index in ``messages`` (see ``oracle.check_compaction``).
    Returns the result and the check, or ``(None, None)`` after an exception."""
    c = ctx.case
    if force is None:
        force = not ctx.compactor.check(messages, system=system, tools=c.tools, format=c.fmt).should_compact
    mode = f"{mode}{'/force' if force else '/auto'}"
    before = oracle.snapshot(messages, system, c.tools)
    ctx.tally.compactions += 1
    try:
        result = ctx.compactor.compact(messages, system=system, tools=c.tools, format=c.fmt, force=force)
    except Exception as e:
        ex = ctx.label(mode) | {"detail": f"{type(e).__name__}: {e}", "where": traceback.format_exc(limit=3)[-600:]}
        ctx.tally.add_count("exception", mode, ex)
        return None, None
    check = oracle.check_compaction(
        messages,
        before,
        result,
        fmt=c.fmt,
        system=system,
        tools=c.tools,
        cfg=ctx.compactor.config,
        counter=ctx.counter,
        cache=ctx.cache,
        validate=ctx.validate,
        task=task,
    )
    ctx.tally.library_problems += check.library_problems
    ctx.tally.over_budget += bool(result.over_budget)
    ctx.tally.fallbacks += bool(ctx.summarizer == "llm" and result.fallback_reason)
    ctx.tally.add_facts(ctx, check.facts)
    if check.facts.lost:
        ti = oracle.task_index(messages) if task == "first" else task
        explain_lost(ctx.tally, messages, result, check.facts.lost, ti, ctx.cache)
        for fact in check.facts.lost:
            ctx.tally.lost_examples.setdefault(
                fact,
                ctx.label(mode)
                | {
                    "input_messages": len(messages),
                    "strategy": result.strategy,
                    "over_budget": result.over_budget,
                    "record": [(e.index, e.action) for e in result.record][:40],
                },
            )
    for kind, details in check.problems.items():
        example = ctx.label(mode) | {
            "input_messages": len(messages),
            "detail": details[0],
            "strategy": result.strategy,
            "tokens_after": result.tokens_after,
            "over_budget": result.over_budget,
            "over_budget_reason": result.over_budget_reason,
        }
        detail = None
        if kind == "task_missing":
            ti = oracle.task_index(messages) if task == "first" else task
            example["task_record"] = [(e.index, e.action, e.detail) for e in result.record if e.index == ti]
            actions = sorted({a for _, a, _ in example["task_record"]})
            problem = "shortened, facts lost" if "lost facts" in details[0] else details[0].split(";")[0][:40]
            detail = f"{problem}; record {actions or 'none'}, over_budget={result.over_budget}"
        elif kind == "over_budget_but_fits":
            capped = "once the summary is capped" in details[0]
            detail = "only with the summary capped at summary_max_tokens" if capped else "the context itself"

        ctx.tally.add_count(kind, mode, example, detail)
    return result, check


def _bump(table: dict[str, int], key: str) -> None:
    table[key] = table.get(key, 0) + 1


def explain_lost(tally: Tally, messages: Sequence[Any], result: Any, lost: Sequence[str], ti: Any, cache: Any) -> None:
    """Diagnosis only (the recall above never uses the library's facts): for each lost fact, the
    first removed input message it came from (the task, user or assistant text, tool-call
    arguments, an earlier summary in the system prompt) and what the library said of it:
    ``must_keep_missing`` (it knew and reported it left out, e.g. the section's cap),
    ``must_keep`` (named as a fact of the span, yet gone), or neither."""
    kept = {id(m) for m in result.messages}
    for fact in lost:
        _bump(tally.lost_facts, fact)
        source = "system prompt (earlier summary)"
        for i, m in enumerate(messages):
            if id(m) in kept or fact not in cache.facts(m):
                continue
            if i == ti:
                source = "the task"
            elif any(fact in fact_rules.facts_in_text(t) for t in fact_rules.call_argument_texts(m)):
                source = "tool-call arguments"
            else:
                source = f"{role(m)} text"
            break
        _bump(tally.lost_sources, source)
        if any(fact in f for f in result.must_keep_missing):
            why = "reported in must_keep_missing"
        elif any(fact in f for f in result.must_keep):
            why = "in must_keep, gone unreported"
        else:
            why = "not in must_keep"
        _bump(tally.lost_why, f"{source}: {why}")


def run_whole(ctx: Context, grid: Grid) -> None:
    for force in grid.whole_modes:
        compact_checked(ctx, list(ctx.case.messages), ctx.case.system, "whole", force=force)


def run_prefixes(ctx: Context, grid: Grid, points: Sequence[int]) -> None:
    for p in spread(points, grid.prefixes):
        compact_checked(ctx, list(ctx.case.messages[:p]), ctx.case.system, "prefix", force=None)


def run_chain(ctx: Context, grid: Grid, points: Sequence[int]) -> None:
    """Compact, append the next transcript messages to the compacted list, compact when due (or
    forced when the transcript would end before ``chain_length`` compactions), and so on. The task
    is followed along the chain (kept, or its shortened form); once lost it is not checked again in
    that chain (the chain counts as having lost it)."""
    c = ctx.case
    if len(points) < 2:
        return
    first = len(points) // 5
    pos = points[first]
    result, check = compact_checked(ctx, list(c.messages[:pos]), c.system, "chain", force=True)
    if result is None or check is None:
        return
    ctx.tally.chains += 1
    current, system, done, task = list(result.messages), result_system(result, c.system), 1, check.task
    for j in range(first + 1, len(points)):
        if done >= grid.chain_length:
            break
        p = points[j]
        current = current + list(c.messages[pos:p])
        pos = p
        due = ctx.compactor.check(current, system=system, tools=c.tools, format=c.fmt).should_compact
        if not due and len(points) - j > grid.chain_length - done:
            continue
        ti = next((i for i, m in enumerate(current) if m is task), None)
        result, check = compact_checked(ctx, current, system, "chain", force=not due, task=ti)
        if result is None or check is None:
            return
        current, system, done = list(result.messages), result_system(result, system), done + 1
        task = check.task if task is not None else None
    if task is None:
        ctx.tally.chains_lost_task += 1


def result_system(result: Any, system: Any) -> Any:
    return result.system if result.system is not None else system


#: A hook that turns each context into another one (``tests/_frameworks.py``: the same sweep on a
#: framework's own message objects).
Adapt = Any


def iter_contexts(
    cases: Sequence[Case], grid: Grid, tally: Tally, adapt: Adapt = None
) -> Iterator[tuple[Context, list[int]]]:
    for case in cases:
        cache = oracle.FactCache()
        counter = TokenCounter("approx")
        size = counter.count_messages(case.messages, system=case.system, tools=case.tools, format=case.fmt)
        points = call_points(case.messages, case.fmt)
        for share in grid.shares:
            for keep in grid.keeps:
                for summary_role in grid.roles:
                    for summarizer in grid.summarizers:
                        compactor = make_compactor(size, share, keep, summary_role, summarizer)
                        ctx = Context(case, share, keep, summary_role, summarizer, compactor, counter, cache, tally)
                        if adapt is not None:
                            ctx = adapt(ctx)
                            if ctx is None:
                                continue
                        yield ctx, points


def sweep(cases: Sequence[Case], grid: Grid, adapt: Adapt = None) -> Tally:
    tally = Tally()
    start = time.perf_counter()
    for ctx, points in iter_contexts(cases, grid, tally, adapt):
        run_whole(ctx, grid)
        run_prefixes(ctx, grid, points)
        run_chain(ctx, grid, points)
    tally.seconds = time.perf_counter() - start
    return tally


def _sweep_one(args: tuple[str, Grid, bool]) -> Tally:
    name, grid, responses = args
    return sweep([c for c in load_cases(responses=responses) if c.name == name], grid)


def sweep_parallel(cases: Sequence[Case], grid: Grid, jobs: int) -> Tally:
    """The same sweep, one corpus file per task on ``jobs`` processes (biggest files first)."""
    if jobs <= 1:
        return sweep(cases, grid)
    import multiprocessing

    start = time.perf_counter()
    names = [c.name for c in sorted(cases, key=lambda c: -len(json.dumps(c.messages, default=str)))]
    tally = Tally()
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        responses = any(c.fmt == "responses" for c in cases)
        for part in pool.imap_unordered(_sweep_one, [(n, grid, responses) for n in names]):
            tally.merge(part)
    tally.seconds = time.perf_counter() - start
    return tally


# -- report ----------------------------------------------------------------------------------------


def report(tally: Tally, grid: Grid) -> str:
    lines = [f"compactions                                        {tally.compactions:>7}"]
    for kind, label in (KINDS | INFO).items():
        n = tally.counts.get(kind, 0)
        modes = ", ".join(f"{m} {k}" for m, k in sorted(tally.by_mode.get(kind, {}).items()))
        lines.append(f"{label:<50} {n:>7}" + (f"   ({modes})" if modes else ""))
        formats = ", ".join(f"{f} {k}" for f, k in sorted(tally.by_format.get(kind, {}).items()))
        if formats:
            lines.append(f"{'':<50} {'':>7}   ({formats})")
        for key, k in sorted(tally.by_detail.get(kind, {}).items(), key=lambda x: -x[1]):
            lines.append(f"{'':<50} {'':>7}   {k:>6} {key}")
    lines += [
        f"{'over_budget results':<50} {tally.over_budget:>7}",
        f"{'LLM summaries replaced by a fallback (info)':<50} {tally.fallbacks:>7}",
        f"{'chains that lost the original task':<50} {tally.chains_lost_task:>7} of {tally.chains}",
        "",
        "must-keep fact recall (kept/total) by window and summarizer:",
        f"  {'window':>6}  " + "  ".join(f"{s:>22}" for s in grid.summarizers),
    ]
    for share in grid.shares:
        cells = []
        for s in grid.summarizers:
            kept, total = tally.recall(share, s)
            cells.append(f"{kept}/{total} {pct(kept, total):>6}".rjust(22))
        lines.append(f"  {share:>6.0%}  " + "  ".join(cells))
    kept, total = tally.recall()
    lines.append(f"  {'all':>6}  {kept}/{total} {pct(kept, total)}")
    worst = sorted(
        ((k / t, key, k, t) for key, (k, t) in tally.file_facts.items() if t and k < t),
        key=lambda x: x[0],
    )[:8]
    if worst:
        lines.append("worst files:")
        for _, key, k, t in worst:
            name = key.rsplit("/", 1)[0]
            lines.append(f"  {key:<70} {k}/{t} {pct(k, t):>6}  e.g. {tally.lost.get(name, [])[:3]}")
    if tally.lost_facts:
        total = sum(tally.lost_sources.values())
        lines.append(
            f"lost facts by source ({total}): "
            + ", ".join(f"{k} {n}" for k, n in sorted(tally.lost_sources.items(), key=lambda x: -x[1]))
        )
        for key, n in sorted(tally.lost_why.items(), key=lambda x: -x[1]):
            lines.append(f"  {n:>6} {key}")
        top = sorted(tally.lost_facts.items(), key=lambda x: -x[1])[:15]
        lines.append("most-lost facts: " + ", ".join(f"{f!r} x{n}" for f, n in top))
    lines.append(f"wall time {tally.seconds:.0f} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the full grid (default: the CI subset)")
    parser.add_argument("--json", type=Path, help="write the tallies and reproducers here")
    parser.add_argument("--jobs", type=int, default=1, help="processes (one corpus file per task)")
    parser.add_argument("--only", help="run only corpus files whose name contains this")
    parser.add_argument("--responses", action="store_true", help="the OpenAI files as Responses items")
    args = parser.parse_args(argv)
    grid = FULL if args.full else CI
    cases = [c for c in load_cases(responses=args.responses) if not args.only or args.only in c.name]
    if not cases:
        print(f"no corpus found at {corpus_dir()} (set CORPUS_DIR)", file=sys.stderr)
        return 2
    tally = sweep_parallel(cases, grid, args.jobs)
    print(report(tally, grid))
    if args.json:
        args.json.write_text(json.dumps(tally.to_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if any(tally.counts.get(k) for k in KINDS) else 0


if __name__ == "__main__":
    sys.exit(main())
