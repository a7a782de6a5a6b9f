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
    >>> report = replay("examples/agent_session.json", ContextCompactor(max_context_tokens=3000))
    >>> report.compaction_count, f"{report.prefix_stability:.0%}", report.valid
    (3, '83%', True)
    >>> svg = render_svg(report)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from context_compactor import _core
from context_compactor._chart import render_svg
from context_compactor.compactor import ContextCompactor
from context_compactor.io import Transcript, load
from context_compactor.results import CompactResult
from context_compactor.session import Session, SessionStore

__all__ = [
    "ReplayCall",
    "ReplayCompaction",
    "ReplayReport",
    "ReplayTurn",
    "model_calls",
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


@dataclass(frozen=True)
class ReplayCall:
    """What :func:`replay` hands ``on_call`` at each model call: the context that would be sent.

    Attributes:
        turn: The model call (0-based).
        message_index: Index in the transcript of the assistant message about to be generated.
        messages: The context's messages (the Session's, as sent).
        system: The system prompt sent with them.
        tools: The tool definitions sent with them.
        ids: The Session's row ids of the context's messages (a summary row included).
        tokens: Tokens of the context (the compactor's count).
        result: The compaction that ran just before, when one did.
        attempt: The compaction that was due just before, whether it changed the context or not
            (a refusal, a compaction that ended ``over_budget``); ``None`` when none was due.
    """

    turn: int
    message_index: int
    messages: list[Any]
    system: Any
    tools: Any
    ids: list[int]
    tokens: int
    result: CompactResult | None
    attempt: CompactResult | None = None


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


def _is_model_output(message: Any, fmt: str) -> bool:
    """Whether the model wrote ``message``: an assistant message (Gemini: ``model``); for
    Responses items also a reasoning item or any call (not an output, which the agent's tool wrote)."""
    role: object = message.get("role")
    if fmt == "responses":
        kind = str(message.get("type", "message"))
        if kind == "message":
            return role == "assistant"
        return kind == "reasoning" or (kind.endswith("_call") or kind == "mcp_approval_request")
    return role in ("assistant", "model")


def _starts_model_output(messages: Sequence[Any], i: int, fmt: str) -> bool:
    """A model call happens before message ``i``: it is the model's and the one before is not (a
    Responses turn is a run of reasoning, message and call items; one call produced the run)."""
    if not _is_model_output(messages[i], fmt):
        return False
    return fmt != "responses" or i == 0 or not _is_model_output(messages[i - 1], fmt)


def model_calls(messages: Sequence[Any], fmt: str) -> list[int]:
    """The indices of the messages before which an agent calls the model (where :func:`replay`
    runs :meth:`Session.prepare`): each assistant message, and for Responses items the first item
    of each run of reasoning, message and call items (a run the tools' outputs interrupt is one
    model call per part)."""
    return [i for i in range(len(messages)) if _starts_model_output(messages, i, fmt)]


def replay(
    transcript: Transcript | str | os.PathLike[str],
    compactor: ContextCompactor,
    *,
    store: str | os.PathLike[str] | SessionStore = ":memory:",
    session_id: str | None = None,
    validate: bool = True,
    progress: TextIO | None = None,
    on_compaction: Callable[[ReplayCompaction], None] | None = None,
    on_call: Callable[[ReplayCall], None] | None = None,
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
        on_call: Called with each :class:`ReplayCall` (the context about to be sent).

    Returns:
        The :class:`ReplayReport`.

    Example:
        >>> report = replay("examples/agent_session.json", ContextCompactor(max_context_tokens=64_000))
        >>> print(report.compaction_count, report.prefix_stability)
        0 1.0
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
    session = Session(
        session_id, compactor=compactor, store=store, system=transcript.system, tools=transcript.tools, format=fmt
    )
    report.session_id = session.id
    try:
        previous: tuple[list[int], Any] | None = None
        for i, message in enumerate(messages):
            if _starts_model_output(messages, i, fmt):
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
                if on_call is not None:
                    on_call(
                        ReplayCall(
                            turn=len(report.turns) - 1,
                            message_index=i,
                            messages=context,
                            system=system,
                            tools=session.tools,
                            ids=ids,
                            tokens=check.current_tokens,
                            result=result if compacted else None,
                            attempt=session._core.attempt,
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
