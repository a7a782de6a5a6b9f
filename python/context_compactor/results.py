"""The values a compaction hands back and forth: requests, responses, results, previews."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["AutoTarget", "CompactResult", "CompactionPreview", "RecordEntry", "SummaryRequest", "SummaryResponse"]

Strategy = Literal["none", "micro", "selective", "summary", "rule_summary", "truncation"]


def _size(text: str | None) -> str:
    """How a long text shows in a repr: its size, not its content."""
    return "None" if text is None else f"<{len(text):,} chars>"


@dataclass(frozen=True)
class SummaryRequest:
    """What your summarizer is asked to summarise.

    Send ``messages`` (an OpenAI-style ``[system, user]`` list, no tools) to any chat model, or
    build your own call from ``system_prompt`` and ``user_prompt``. Return the reply text (or a
    :class:`SummaryResponse`); the summary is expected inside ``<summary>…</summary>``.

    Attributes:
        system_prompt: Instructions for the summarizing model.
        user_prompt: The transcript of the replaced messages and what to write.
        previous_summary: The narrative of an earlier compaction's summary this one updates
            (incremental), without its ledger.
        ledger: The ledger the library carries verbatim after your summary (the user's words,
            preserved details, artifact trail of earlier compactions), as read-only context: do
            not rewrite or repeat it (see ``docs/ledger.md``). ``None`` when there is none.
        instructions: Extra instructions given to ``compact(instructions=...)``.
        max_tokens: The summary's cap (``summary_max_tokens``); pass it as the reply limit.
        must_keep: File paths, URLs and error names the summary should keep (missing ones are
            appended to the summary anyway).
        language: ``"en"`` or ``"zh"``: the conversation's language.
        replaced_count: How many messages the summary replaces.
        chunk: This chunk (0-based) when the span is summarised in chunks.
        chunks: Number of chunks.
        span: The messages the summary replaces, as given, for a native strategy (a summarizer
            with ``wants_span = True``) that sends them to the provider; ``()`` otherwise.
    """

    system_prompt: str
    user_prompt: str
    previous_summary: str | None = None
    instructions: str | None = None
    max_tokens: int = 2000
    must_keep: tuple[str, ...] = ()
    language: str = "en"
    replaced_count: int = 0
    chunk: int = 0
    chunks: int = 1
    span: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    ledger: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        # The prompts hold the whole transcript: show their sizes, not their text.
        return (
            f"SummaryRequest(replaced_count={self.replaced_count}, chunk={self.chunk + 1}/{self.chunks}, "
            f"max_tokens={self.max_tokens}, language={self.language!r}, must_keep={len(self.must_keep)}, "
            f"previous_summary={_size(self.previous_summary)}, user_prompt={_size(self.user_prompt)})"
        )

    @property
    def messages(self) -> list[dict[str, str]]:
        """A ready OpenAI-style request: ``[{"role": "system", ...}, {"role": "user", ...}]``."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_prompt},
        ]


@dataclass(frozen=True)
class SummaryResponse:
    """A summarizer's reply with details.

    Attributes:
        text: The reply (the summary, ideally inside ``<summary>`` tags).
        truncated: The model stopped at its token limit (``finish_reason == "length"``).
        usage: The provider's usage object, if you want it kept with the result.
        items: Provider compaction output that replaces the span as it is (OpenAI's user messages
            and ``compaction`` item, or Anthropic's assistant message holding the ``compaction``
            block); ``text`` is then the readable part, if any. See :mod:`context_compactor.summarizers.native`.
        summary_source: Who wrote ``items`` (``"provider:openai"``, ``"provider:anthropic"``).
    """

    text: str
    truncated: bool = False
    usage: Any = None
    items: tuple[Any, ...] | None = None
    summary_source: str | None = None


@dataclass(frozen=True)
class AutoTarget:
    """What ``target_ratio="auto"`` chose for one compaction (the core's chooser,
    ``src/config/auto_target.rs``, which the Rust API runs too).

    Attributes:
        ratio: The target as a share of the budget.
        tokens: The target in tokens.
        floor: The smallest target that keeps the tail, the task, the ledger and the summary.
        growth: The growth per call it was computed from (``None``: the fixed fallback ratio).
        cost_per_call: The predicted billed input per model call over a cycle (dollars), at the
            chosen target (``None`` with the fallback).
        fixed: The fixed part (system prompt and tool definitions), in tokens.
        prices: The prices weighed (input, cached read, cache write, output per million tokens).
    """

    ratio: float
    tokens: int
    floor: int
    growth: float | None
    cost_per_call: float | None
    fixed: int = 0
    prices: tuple[float, ...] = ()


@dataclass(frozen=True)
class RecordEntry:
    """What happened to one input message.

    Attributes:
        index: Index of the message in the input list (a row id in a ``Session``).
        action: ``"summarized"``, ``"cleared"`` (tool output → placeholder), ``"args_cut"``,
            ``"thinking_dropped"``, ``"image_removed"``, ``"text_cut"``, ``"shortened"`` (cut head +
            tail to fit the window: the task at ``task_max_tokens``, tool output of the last block),
            ``"truncated"`` (removed to fit; its must-keep facts are in the summary), ``"repaired"`` or
            ``"dropped"`` (by repair).
        detail: Readable detail (tool name, sizes).
    """

    index: int
    action: str
    detail: str = ""


def _record_entries(rows: list[dict[str, Any]]) -> tuple[RecordEntry, ...]:
    """The core's record rows (dicts with exactly RecordEntry's fields) as RecordEntry objects.

    A micro-compaction of a long conversation records thousands of entries, and the frozen
    dataclass's ``__init__`` (three ``object.__setattr__`` calls) was 6% of ``micro_compact()``
    on 10k messages; filling the instance dict directly builds the same objects 3x faster.
    """
    new = object.__new__
    out = []
    for row in rows:
        entry = new(RecordEntry)
        entry.__dict__.update(row)
        out.append(entry)
    return tuple(out)


@dataclass(frozen=True)
class CompactResult:
    """The outcome of a compaction.

    Kept messages are the same objects as in the input; edited and new ones are new dicts. The
    input list is never modified: use ``result.messages`` (and ``result.system`` for Anthropic's
    separate system prompt).

    Attributes:
        messages: The conversation to send now.
        system: The system prompt to send (changed only with ``summary_role="system"`` on
            Anthropic; otherwise what you passed).
        summary: The summary message's text, if a summary was made.
        tokens_before: Tokens before (calibrated with a state).
        tokens_after: Tokens after.
        original_count: Input messages.
        retained_count: Input messages still present (kept or edited).
        compacted_count: Input messages replaced or removed.
        flushed_memories: What an ``on_before_compact`` hook reported with ``preview.flushed(n)``.
        strategy: The strongest step applied, ranked ``"none" < "micro" < "selective" < "truncation"
            < "rule_summary" < "summary"``; ``phases`` and ``record`` show the rest.
        summary_source: Who wrote the summary: ``"llm"`` (your summarizer), ``"rule"`` (the
            built-in rule summary: no summarizer, a fallback, cool-down), or ``None`` (no summary).
        fallback_reason: Why a fallback ran (the summarizer's error class and short text, or the
            summary replaced by a shorter one to fit), else ``None``.
        origins: Where each message of ``messages`` came from, in order: ``("kept", i)`` (input
            message ``i``, the same object), ``("edited", i)`` (a copy of it with blocks cleared
            or cut), ``("summary", None)`` or ``("inserted", None)`` (a repair or a filler the
            provider's shape needs).
        over_budget: Still above the soft threshold; ``over_budget_reason`` says why.
        repairs: Repairs made to invalid input, in words.
        record: One :class:`RecordEntry` per replaced or edited input message.
        phases: ``(phase, tokens after it)`` for each step that ran.
        must_keep_missing: Must-keep facts that did not fit in the summary.
        must_keep: The must-keep facts of the replaced span.
        summary_truncated: The summary was cut to ``summary_max_tokens``.
        reason: Why nothing (more) was done, when so.
        language: The conversation's language (``"en"`` / ``"zh"``).
        summary_usage: The usage each summarizer call reported (``SummaryResponse.usage``), in order.
        recalls: With ``recall=True``: the original text of each recall id the messages name
            (``{id: text}``); a :class:`Session` stores them, ``offload_dir`` holds them as files.
        target_ratio: The target the compaction aimed at, as a share of the budget (with
            ``target_ratio="auto"``, the one chosen for this conversation); ``None`` when no
            plan was made.
    """

    messages: list[Any]
    system: Any = None
    summary: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    original_count: int = 0
    retained_count: int = 0
    compacted_count: int = 0
    flushed_memories: int = 0
    strategy: Strategy = "none"
    summary_source: str | None = None
    fallback_reason: str | None = None
    over_budget: bool = False
    over_budget_reason: str | None = None
    repairs: tuple[str, ...] = ()
    record: tuple[RecordEntry, ...] = ()
    phases: tuple[tuple[str, int], ...] = ()
    must_keep_missing: tuple[str, ...] = ()
    must_keep: tuple[str, ...] = ()
    summary_truncated: bool = False
    reason: str | None = None
    language: str = "en"
    summary_usage: tuple[Any, ...] = ()
    origins: tuple[tuple[str, int | None], ...] = ()
    recalls: Mapping[str, str] = field(default_factory=dict)
    target_ratio: float | None = None

    def __repr__(self) -> str:
        # Short on purpose: the messages (thousands, in a long run) are in ``.messages``.
        over = f", over_budget_reason={self.over_budget_reason!r}" if self.over_budget else ""
        return (
            f"CompactResult(strategy={self.strategy!r}, messages={len(self.messages)} (of {self.original_count}), "
            f"tokens={self.tokens_before:,} -> {self.tokens_after:,}, over_budget={self.over_budget}{over}, "
            f"summary={_size(self.summary)}, summary_source={self.summary_source!r}, "
            f"fallback_reason={self.fallback_reason!r}, repairs={len(self.repairs)}, record={len(self.record)})"
        )

    @property
    def compacted(self) -> bool:
        """Whether a compaction step ran (``strategy != "none"``)."""
        return self.strategy != "none"

    @property
    def changed(self) -> bool:
        """Whether ``messages`` differ from the input: a compaction, or only repairs of invalid input
        (``strategy="none"`` with ``repairs``). Always send ``result.messages``."""
        return self.strategy != "none" or bool(self.repairs)

    @property
    def saved_tokens(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after

    @classmethod
    def _from_core(cls, d: dict[str, Any], **extra: Any) -> CompactResult:
        # The shell's reason (the summarizer failed) wins over the core's (the summary was
        # replaced by a shorter one to fit).
        if d["fallback_reason"] is not None and extra.get("fallback_reason") is None:
            extra["fallback_reason"] = d["fallback_reason"]
        return cls(
            messages=d["messages"],
            system=d["system"],
            summary=d["summary"],
            tokens_before=d["tokens_before"],
            tokens_after=d["tokens_after"],
            original_count=d["original_count"],
            retained_count=d["retained_count"],
            compacted_count=d["compacted_count"],
            strategy=d["strategy"],
            summary_source=d["summary_source"],
            origins=tuple(d["origins"]),
            over_budget=d["over_budget"],
            over_budget_reason=d["over_budget_reason"],
            repairs=tuple(d["repairs"]),
            record=_record_entries(d["record"]),
            phases=tuple((str(p), int(t)) for p, t in d["phases"]),
            must_keep_missing=tuple(d["must_keep_missing"]),
            must_keep=tuple(d["must_keep"]),
            summary_truncated=d["summary_truncated"],
            reason=d["reason"],
            language=d["language"],
            recalls=dict(d.get("recalls") or {}),
            **extra,
        )


@dataclass
class CompactionPreview:
    """What ``on_before_compact`` sees before a compaction runs the summarizer.

    Call :meth:`veto` to keep the conversation as it is, :meth:`use_summary` to supply the
    summary yourself (the summarizer is not called), :meth:`flushed` to report memories saved
    elsewhere (seed 000's memory flush; shown in ``result.flushed_memories``), :meth:`force` to
    make a background compaction run now, in the foreground.

    With ``background=True`` a :class:`~context_compactor.Session` calls the hook from the soft
    threshold, before it starts the summary in the background (:attr:`background` is then
    ``True``): a veto means no background job is started this time.

    Attributes:
        messages: The input messages (do not modify them).
        tokens_before: Tokens now.
        request: The summary request that would be sent (``None`` for micro/selective only).
        replaced_count: Messages the summary would replace.
        background: The summary would run in the background (``background=True``, soft threshold).
    """

    messages: Sequence[Any]
    tokens_before: int
    request: SummaryRequest | None
    replaced_count: int = 0
    background: bool = False
    _veto: str | None = field(default=None, repr=False)
    _summary: str | None = field(default=None, repr=False)
    _flushed: int = field(default=0, repr=False)
    _forced: bool = field(default=False, repr=False)
    _candidates: Any = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"CompactionPreview(messages={len(self.messages)}, tokens_before={self.tokens_before:,}, "
            f"replaced_count={self.replaced_count}, background={self.background}, request={self.request!r})"
        )

    @property
    def candidates(self) -> tuple[int, ...]:
        """Indices (in :attr:`messages`) of the messages this compaction would replace or edit,
        ascending: the summarised span, cleared tool results, cut arguments. Worked out on first
        read (it applies the plan with the rule summary, which costs about a compaction)."""
        if callable(self._candidates):
            self._candidates = tuple(self._candidates())
        return self._candidates if self._candidates is not None else ()

    def veto(self, reason: str = "vetoed by on_before_compact") -> None:
        """Cancel this compaction; the result has ``strategy="none"`` and this reason."""
        self._veto = reason or "vetoed by on_before_compact"

    def use_summary(self, text: str) -> None:
        """Use ``text`` as the summary instead of calling the summarizer."""
        if not isinstance(text, str):
            raise TypeError(f"use_summary expects a str, got {type(text).__name__}")
        self._summary = text

    def flushed(self, n: int) -> None:
        """Report ``n`` memories flushed to your own store before compaction."""
        self._flushed += int(n)

    def force(self) -> None:
        """Compact now, waiting for the summary, instead of in the background (no effect on a
        compaction that already runs in the foreground)."""
        self._forced = True

    @property
    def vetoed(self) -> bool:
        return self._veto is not None

    @property
    def forced(self) -> bool:
        """Whether :meth:`force` was called."""
        return self._forced


def candidates_of(plan: Any) -> Any:
    """A callable giving the indices a plan would replace or edit (for :attr:`CompactionPreview.candidates`)."""

    def compute() -> list[int]:
        return sorted({e.index for e in plan.apply(None).record})

    return compute
