"""Replay a transcript through a :class:`~context_compactor.session.Session`, as an agent would.

``context-compactor replay FILE --max-tokens N`` feeds a transcript (any file
:func:`context_compactor.io.load` reads) into a Session message by message, calling
:meth:`Session.prepare` before each assistant message (the moment an agent calls the model), and
reports each compaction (message index, tokens before → after, strategy, must-keep facts still
in the context), the compaction ratio, the cache-prefix stability (the share of model calls
whose context starts with the previous call's context unchanged, so a provider's prompt cache
still hits), and whether every context sent was valid. A context over the window (over the
budget, ``max_context_tokens - reserve``: no room left for the reply) is invalid like one that
breaks a provider rule; the report says which calls were over and by how much, and the command
exits 1. ``--chart out.svg`` draws the context size over the turns with the window and the
compactions marked (an SVG, see :mod:`context_compactor._chart`; no plotting dependency).

Example:
    >>> from context_compactor import ContextCompactor
    >>> from context_compactor.replay import replay, render_svg
    >>> report = replay("examples/agent_session.json", ContextCompactor(max_context_tokens=3000))  # doctest: +SKIP
    >>> report.compaction_count, f"{report.prefix_stability:.0%}", report.valid            # doctest: +SKIP
    (3, '89%', True)
    >>> svg = render_svg(report)                                                                # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from context_compactor import _core
from context_compactor._chart import render_svg
from context_compactor.compactor import ContextCompactor
from context_compactor.io import Transcript, load
from context_compactor.session import Session, SessionStore

__all__ = [
    "ReplayCompaction",
    "ReplayReport",
    "ReplayTurn",
    "add_replay_parser",
    "cmd_replay",
    "render_svg",
    "replay",
]


@dataclass(frozen=True)
class ReplayCompaction:
    """One compaction during a replay.

    Attributes:
        turn: The model call (0-based) it happened before.
        message_index: Index in the transcript of the assistant message about to be generated.
        tokens_before: Context tokens before.
        tokens_after: Context tokens after.
        strategy: The compaction's strategy.
        facts_kept: Must-keep facts of the replaced span found in the new context (or system).
        facts_total: Must-keep facts of the replaced span.
        messages_replaced: Input messages replaced or removed.
        over_budget: Still above the soft threshold.
        fallback_reason: Why the summarizer's reply was not used, when so.
        record_id: The Session's compaction record id.
    """

    turn: int
    message_index: int
    tokens_before: int
    tokens_after: int
    strategy: str
    facts_kept: int
    facts_total: int
    messages_replaced: int
    over_budget: bool
    fallback_reason: str | None
    record_id: int | None


@dataclass(frozen=True)
class ReplayTurn:
    """One model call during a replay: the context sent before an assistant message.

    Attributes:
        message_index: Index of the assistant message in the transcript.
        tokens: Tokens of the context sent.
        messages: Messages in the context sent.
        compacted: A compaction ran just before.
        prefix_stable: The context starts with the previous call's context unchanged (``None``
            for the first call).
        problems: Why the context would be rejected (empty when valid), ``"over_window"`` included.
        inherited: Every problem is one the transcript itself has at this point (its own
            messages up to here, uncompacted, fail the same rules): not the Session's doing.
            Never for a context over the window: fitting it is the Session's job.
        over_by: Tokens over the budget (``tokens - budget``; 0 when the context fits).
        over_budget: :meth:`Session.prepare` answered ``over_budget=True`` just before.
    """

    message_index: int
    tokens: int
    messages: int
    compacted: bool
    prefix_stable: bool | None
    problems: tuple[str, ...] = ()
    inherited: bool = False
    over_by: int = 0
    over_budget: bool = False


@dataclass
class ReplayReport:
    """What a replay found.

    Attributes:
        file: The transcript file (or ``None``).
        format: The transcript's format.
        message_count: Messages in the transcript.
        transcript_tokens: Tokens of the whole transcript sent at once (no compaction).
        final_tokens: Tokens of the final context.
        soft_threshold: The compactor's soft threshold.
        hard_threshold: The compactor's hard threshold.
        turns: Each model call.
        compactions: Each compaction.
        seconds: Wall time of the replay.
        session_id: The Session's id in the store.
        budget: The window's budget (``max_context_tokens - reserve``); a context above it is over
            the window.
    """

    file: str | None
    format: str
    message_count: int
    transcript_tokens: int
    final_tokens: int
    soft_threshold: int
    hard_threshold: int
    turns: list[ReplayTurn] = field(default_factory=list)
    compactions: list[ReplayCompaction] = field(default_factory=list)
    seconds: float = 0.0
    session_id: str = ""
    budget: int | None = None

    def __repr__(self) -> str:
        return (
            f"ReplayReport(file={self.file!r}, format={self.format!r}, messages={self.message_count}, "
            f"turns={len(self.turns)}, compactions={len(self.compactions)}, "
            f"over_window_turns={len(self.over_window_turns)}, transcript_tokens={self.transcript_tokens:,}, "
            f"final_tokens={self.final_tokens:,})"
        )

    @property
    def compaction_count(self) -> int:
        """Number of compactions."""
        return len(self.compactions)

    @property
    def compaction_ratio(self) -> float | None:
        """Tokens after / tokens before, summed over every compaction (``None`` without any)."""
        before = sum(c.tokens_before for c in self.compactions)
        return sum(c.tokens_after for c in self.compactions) / before if before else None

    @property
    def final_ratio(self) -> float | None:
        """Final context tokens / tokens of the whole transcript."""
        return self.final_tokens / self.transcript_tokens if self.transcript_tokens else None

    @property
    def stable_turns(self) -> int:
        """Model calls whose context starts with the previous call's context unchanged."""
        return sum(1 for t in self.turns if t.prefix_stable)

    @property
    def prefix_stability(self) -> float | None:
        """Share of model calls (after the first) whose context starts with the previous call's
        context unchanged (same system prompt too): a provider's prompt cache still hits."""
        pairs = len(self.turns) - 1
        return self.stable_turns / pairs if pairs > 0 else None

    @property
    def invalid_turns(self) -> list[ReplayTurn]:
        """Model calls whose context a provider would reject: over the window, or breaking a rule
        the transcript's own messages up to that point did not break."""
        return [t for t in self.turns if t.over_by > 0 or (t.problems and not t.inherited)]

    @property
    def inherited_turns(self) -> list[ReplayTurn]:
        """Model calls whose context has only problems the transcript itself has there."""
        return [t for t in self.turns if t.problems and t.inherited and t.over_by == 0]

    @property
    def over_window_turns(self) -> list[ReplayTurn]:
        """Model calls whose context was over the window (``over_by > 0``)."""
        return [t for t in self.turns if t.over_by > 0]

    @property
    def valid(self) -> bool:
        """No context sent was over the window or had a problem the transcript did not have already."""
        return not self.invalid_turns

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (with the derived figures)."""
        d = asdict(self)
        d.update(
            compaction_count=self.compaction_count,
            compaction_ratio=self.compaction_ratio,
            final_ratio=self.final_ratio,
            stable_turns=self.stable_turns,
            prefix_stability=self.prefix_stability,
            over_window_count=len(self.over_window_turns),
            max_over_by=max((t.over_by for t in self.turns), default=0),
            valid=self.valid,
        )
        return d


def _strings(obj: Any) -> Iterator[str]:
    """Every string inside a JSON-like value."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


class _Progress:
    """A one-line progress bar on a terminal (nothing when the stream is not a TTY)."""

    def __init__(self, total: int, stream: TextIO | None, label: str) -> None:
        isatty = getattr(stream, "isatty", None)
        self.stream = stream if stream is not None and callable(isatty) and isatty() else None
        self.total = max(total, 1)
        self.label = label
        self.last = 0.0

    def update(self, done: int, note: str = "") -> None:
        if self.stream is None:
            return
        t = time.monotonic()
        if t - self.last < 0.1 and done < self.total:
            return
        self.last = t
        width = 30
        filled = width * done // self.total
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {note}".ljust(79)[:79]
        )
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()


def replay(
    transcript: Transcript | str | os.PathLike[str],
    compactor: ContextCompactor,
    *,
    store: str | os.PathLike[str] | SessionStore = ":memory:",
    session_id: str | None = None,
    validate: bool = True,
    progress: TextIO | None = None,
    on_compaction: Callable[[ReplayCompaction], None] | None = None,
) -> ReplayReport:
    """Feed a transcript into a new :class:`Session` message by message, as an agent would.

    Before each assistant message (a model call) the Session's :meth:`~Session.prepare` runs and
    the context that would be sent is measured, compared with the previous one (cache-prefix
    stability) and, with ``validate``, checked with :func:`validate_messages`.

    Args:
        transcript: A :class:`~context_compactor.io.Transcript` or a file :func:`io.load` reads.
        compactor: The compactor (its window, summarizer, hooks).
        store: Where the Session lives (``":memory:"`` by default; a path keeps it).
        session_id: The Session's id (a new one by default).
        validate: Validate every context sent.
        progress: A stream for a progress bar (drawn only when it is a TTY).
        on_compaction: Called with each :class:`ReplayCompaction` as it happens.

    Returns:
        The :class:`ReplayReport`.

    Example:
        >>> report = replay("session.jsonl", ContextCompactor(max_context_tokens=64_000))  # doctest: +SKIP
        >>> print(report.compaction_count, report.prefix_stability)                        # doctest: +SKIP
    """
    t0 = time.perf_counter()
    path: str | None = None
    if not isinstance(transcript, Transcript):
        path = os.fspath(transcript)
        transcript = load(path)
    else:
        path = transcript.path
    messages, fmt = transcript.messages, transcript.format
    cfg = compactor.config
    counts = compactor.counter.count_each(messages, system=transcript.system, tools=transcript.tools, format=fmt)
    report = ReplayReport(
        file=path,
        format=fmt,
        message_count=len(messages),
        transcript_tokens=counts.total,
        final_tokens=0,
        soft_threshold=cfg.soft_threshold,
        hard_threshold=cfg.hard_threshold,
        budget=cfg.budget,
    )
    bar = _Progress(len(messages), progress, "replay")
    session = Session(compactor, store, session_id, system=transcript.system, tools=transcript.tools, format=fmt)
    report.session_id = session.id
    try:
        previous: tuple[list[int], Any] | None = None
        for i, message in enumerate(messages):
            if message.get("role") == "assistant":
                result = session.prepare()
                ids = session.context_ids()
                context = session.context()
                system = session.system
                check = session.check()
                # prepare() also answers when it could do nothing over the hard threshold: not a compaction.
                compacted = result is not None and result.changed
                if result is not None and compacted:
                    text = "\n".join(_strings([result.messages, result.system]))
                    kept = sum(1 for f in result.must_keep if f in text)
                    records = session.compactions()
                    c = ReplayCompaction(
                        turn=len(report.turns),
                        message_index=i,
                        tokens_before=result.tokens_before,
                        tokens_after=result.tokens_after,
                        strategy=result.strategy,
                        facts_kept=kept,
                        facts_total=len(result.must_keep),
                        messages_replaced=result.compacted_count,
                        over_budget=result.over_budget,
                        fallback_reason=result.fallback_reason,
                        record_id=records[-1].id if records else None,
                    )
                    report.compactions.append(c)
                    if on_compaction is not None:
                        on_compaction(c)
                stable = None
                if previous is not None:
                    prev_ids, prev_system = previous
                    stable = ids[: len(prev_ids)] == prev_ids and system == prev_system
                problems: tuple[str, ...] = ()
                inherited = False
                if validate:
                    found = _core.validate_messages(context, format=fmt, system=system, tools=session.tools)
                    problems = tuple(str(p) for p in found)
                    if found:
                        own = _core.validate_messages(
                            messages[:i], format=fmt, system=transcript.system, tools=transcript.tools
                        )
                        inherited = {p.rule for p in found} <= {p.rule for p in own}
                # Counted as the Session counts (the compactor's tokenizer and framing), so "over"
                # means what prepare() and check() mean by it.
                over_by = max(0, check.current_tokens - cfg.budget)
                if over_by:
                    problems += (
                        f"the context is {check.current_tokens} tokens, over the window's budget {cfg.budget} "
                        f"by {over_by} (over_window)",
                    )
                    inherited = False
                report.turns.append(
                    ReplayTurn(
                        message_index=i,
                        tokens=check.current_tokens,
                        messages=len(context),
                        compacted=compacted,
                        prefix_stable=stable,
                        problems=problems,
                        inherited=inherited,
                        over_by=over_by,
                        over_budget=result is not None and result.over_budget,
                    )
                )
                previous = (ids, system)
            session.append(message)
            bar.update(i + 1, f"{len(report.compactions)} compactions")
        report.final_tokens = session.check().current_tokens
    finally:
        bar.close()
        session.close()
    report.seconds = time.perf_counter() - t0
    return report


# -- the command ------------------------------------------------------------------------------------------------


def add_replay_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``replay`` subcommand to the CLI's subparsers.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_replay_parser(parser.add_subparsers(dest="command"))   # doctest: +ELLIPSIS
        ArgumentParser(...)
    """
    p: argparse.ArgumentParser = sub.add_parser(
        "replay", help="feed a transcript into a Session as an agent would and report each compaction"
    )
    p.add_argument("file", help="OpenAI JSON, Anthropic JSON, or Claude Code session JSONL")
    p.add_argument("--max-tokens", type=int, default=None, help="the model's window (max_context_tokens)")
    p.add_argument("--config", default=None, help="a TOML file of CompactionConfig fields (or a preset = ...)")
    p.add_argument("--format", choices=["openai", "anthropic"], default=None, help="force the message format")
    p.add_argument("--keep-recent", type=int, default=None, help="keep_recent_messages")
    p.add_argument("--tokenizer", default=None, help="approx (default), o200k_base or cl100k_base")
    p.add_argument(
        "--summarizer", default=None, help="module:function taking a SummaryRequest (default: the rule summary)"
    )
    p.add_argument("--summarizer-url", default=None, help="an OpenAI-compatible server's base URL (…/v1)")
    p.add_argument("--model", default=None, help="the model to summarise with (with --summarizer-url)")
    p.add_argument(
        "--api-key-env", default=None, metavar="VAR", help="environment variable holding the server's API key"
    )
    p.add_argument("--chart", default=None, metavar="OUT.svg", help="write an SVG chart of the context size")
    p.add_argument("--store", default=":memory:", help="SQLite file to keep the replayed session in")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_replay)
    return p


def _summarizer(args: argparse.Namespace) -> Callable[..., Any] | None:
    if args.summarizer_url and args.summarizer:
        raise ValueError("give either --summarizer or --summarizer-url, not both")
    if args.summarizer_url:
        if not args.model:
            raise ValueError("--summarizer-url needs --model")
        from context_compactor.summarizers import openai_compatible

        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        if args.api_key_env and not key:
            raise ValueError(f"--api-key-env: the environment variable {args.api_key_env} is not set")
        return openai_compatible(args.summarizer_url, args.model, api_key=key)
    if args.summarizer:
        from context_compactor.cli import _import_summarizer

        return _import_summarizer(args.summarizer)
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    """Run ``context-compactor replay``; exit status 0 when every context was valid and inside the
    window, else 1."""
    from context_compactor.cli import _load_config

    transcript = load(args.file, format=args.format)
    config = _load_config(args)
    compactor = ContextCompactor(config, summarizer=_summarizer(args))
    out = sys.stdout
    if not args.json:
        summ = f"{args.model} at {args.summarizer_url}" if args.summarizer_url else args.summarizer or "rule summary"
        out.write(
            f"{args.file}: {transcript.format}, {len(transcript.messages)} messages\n"
            f"window {config.max_context_tokens:,} tokens (reserve {config.reserve:,}, budget {config.budget:,}, "
            f"soft threshold {config.soft_threshold:,}, hard {config.hard_threshold:,}), "
            f"tokenizer {compactor.counter.name}, summarizer {summ}\n\n"
            f"{'#':>3}  {'message':>7}  {'tokens before → after':>24}  {'strategy':<13}{'facts kept':>10}\n"
        )
        out.flush()
    count = 0

    def show(c: ReplayCompaction) -> None:
        nonlocal count
        count += 1
        if args.json:
            return
        facts = f"{c.facts_kept}/{c.facts_total}" if c.facts_total else "-"
        flags = "  OVER BUDGET" if c.over_budget else ""
        flags += f"  fallback: {c.fallback_reason}" if c.fallback_reason else ""
        line = f"{count:>3}  {c.message_index:>7}  {c.tokens_before:>11,} → {c.tokens_after:<10,}  "
        # Clear a progress bar line before printing.
        if sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 79 + "\r")
        out.write(f"{line}{c.strategy:<13}{facts:>10}{flags}\n")
        out.flush()

    report = replay(transcript, compactor, store=args.store, progress=sys.stderr, on_compaction=show)
    if args.chart:
        with open(args.chart, "w", encoding="utf-8") as f:
            f.write(render_svg(report))
    if args.json:
        d = report.to_dict()
        d["turns"] = len(report.turns)
        d["invalid_turns"] = [asdict(t) for t in report.invalid_turns]
        d["inherited_turns"] = [asdict(t) for t in report.inherited_turns]
        d["over_window_turns"] = [
            {"message_index": t.message_index, "tokens": t.tokens, "over_by": t.over_by}
            for t in report.over_window_turns
        ]
        d["chart"] = args.chart
        print(json.dumps(d, ensure_ascii=False, indent=2))
        return 0 if report.valid else 1
    if not report.compactions:
        out.write("  (no compaction was needed)\n")
    ratio, stab, final = report.compaction_ratio, report.prefix_stability, report.final_ratio
    out.write("\n")
    out.write(
        f"compactions       {report.compaction_count} over {len(report.turns)} model calls"
        + (f", compaction ratio {ratio:.2f} (tokens after / before)" if ratio is not None else "")
        + "\n"
    )
    out.write(
        f"final context     {report.final_tokens:,} tokens"
        + (f" ({final:.1%} of the whole transcript's {report.transcript_tokens:,})" if final is not None else "")
        + "\n"
    )
    if stab is not None:
        out.write(
            f"cache-prefix      {stab:.1%} ({report.stable_turns}/{len(report.turns) - 1} calls start with "
            "the previous call's context unchanged)\n"
        )
    invalid, inherited = report.invalid_turns, report.inherited_turns
    out.write(
        f"valid contexts    {len(report.turns) - len(invalid) - len(inherited)}/{len(report.turns)}"
        + (f"; first problem at message {invalid[0].message_index}: {invalid[0].problems[0]}" if invalid else "")
        + "\n"
    )
    if inherited:
        out.write(
            f"                  {len(inherited)} invalid as in the transcript itself (uncompacted), e.g. before "
            f"message {inherited[0].message_index}: {inherited[0].problems[0]}\n"
        )
    over = report.over_window_turns
    if over:
        worst = max(over, key=lambda t: t.over_by)
        out.write(
            f"over the window   {len(over)} of {len(report.turns)} calls over the budget {config.budget:,} "
            f"(first before message {over[0].message_index}; worst {worst.tokens:,} tokens, +{worst.over_by:,}, "
            f"before message {worst.message_index})\n"
        )
    out.write(f"time              {report.seconds:.2f} s\n")
    if args.chart:
        out.write(f"chart             {args.chart}\n")
    return 0 if report.valid else 1
