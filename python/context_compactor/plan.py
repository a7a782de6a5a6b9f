"""`CompactionPlan`: a compaction waiting for its summary (bring your own LLM call)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from context_compactor import _core
from context_compactor.errors import SummarizerError
from context_compactor.results import CompactResult, SummaryRequest, SummaryResponse

__all__ = ["CompactionPlan"]


def _request(d: dict[str, Any] | None) -> SummaryRequest | None:
    if d is None:
        return None
    return SummaryRequest(
        system_prompt=d["system_prompt"],
        user_prompt=d["user_prompt"],
        previous_summary=d["previous_summary"],
        instructions=d["instructions"],
        max_tokens=d["max_tokens"],
        must_keep=tuple(d["must_keep"]),
        language=d["language"],
        replaced_count=d["replaced_count"],
        chunk=d["chunk"],
        chunks=d["chunks"],
        ledger=d.get("ledger"),
    )


def result_of(d: dict[str, Any], **extra: Any) -> CompactResult:
    """The :class:`CompactResult` of the core's finished compaction ``d``. Framework input comes
    back in the framework's own classes: the core tags it (``d["framework"]``) and the adapter
    module builds the new and edited messages (kept ones are the input objects already)."""
    framework = d.pop("framework", None)
    if framework == "pydantic_ai":
        from context_compactor.integrations.pydantic_ai import from_core_output as pydantic_ai_output

        d["messages"] = pydantic_ai_output(d["messages"], d.pop("originals"))
    elif framework == "langchain":
        from context_compactor.integrations.langchain import from_core_output as langchain_output

        d["messages"] = langchain_output(d["messages"])
    return CompactResult._from_core(d, **extra)


_UNSET = object()


class CompactionPlan:
    """What a compaction will replace, and the request for its summary.

    Pure: nothing happens to your messages until you use the result of :meth:`apply`.

    Example:
        >>> plan = compactor.plan(messages)
        >>> text = my_llm(plan.request.messages) if plan.request else None
        >>> result = plan.apply(text)          # None: the built-in rule summary
        >>> messages = result.messages
    """

    __slots__ = ("_core_plan", "_on_applied", "_request", "_tokenizer", "target_ratio")

    def __init__(
        self,
        core_plan: _core.Plan,
        tokenizer: Any,
        *,
        target_ratio: float | None = None,
        on_applied: Callable[[CompactResult], None] | None = None,
    ) -> None:
        self._core_plan = core_plan
        #: Called with the result of :meth:`apply` (``target_ratio="auto"`` sets the state's
        #: next due point).
        self._on_applied = on_applied
        self._tokenizer = tokenizer
        self._request: SummaryRequest | object | None = _UNSET
        #: The target the compaction aims at, as a share of the budget (with
        #: ``target_ratio="auto"``, the one chosen for this conversation now).
        self.target_ratio = target_ratio

    @property
    def request(self) -> SummaryRequest | None:
        """The summary request (for the current chunk), or ``None`` when no summary is needed.

        Built on first access: the transcript of a long span costs reading its tool output,
        which a compaction with the built-in rule summary never needs."""
        if self._request is _UNSET:
            self._request = _request(self._core_plan.request(self._tokenizer))
        return self._request  # type: ignore[return-value]

    @property
    def remaining_chunks(self) -> int:
        """Chunks after the current one (long spans are summarised in chunks, each updating the
        previous summary): call :meth:`advance` with each reply until this is 0."""
        return self._core_plan.remaining_chunks(self._tokenizer)

    @property
    def reason(self) -> str | None:
        """Why no (more) compaction is planned, when so."""
        return self._core_plan.reason

    @property
    def tokens_before(self) -> int:
        """Tokens of the conversation now."""
        return self._core_plan.tokens_before

    def advance(self, summary: str | SummaryResponse) -> CompactionPlan:
        """The plan for the next chunk, given the summary of the chunks so far."""
        text = summary.text if isinstance(summary, SummaryResponse) else summary
        if not isinstance(text, str):
            raise SummarizerError(f"advance expects the summary text, got {type(text).__name__}")
        return CompactionPlan(
            self._core_plan.advance(text),
            self._tokenizer,
            target_ratio=self.target_ratio,
            on_applied=self._on_applied,
        )

    def apply(self, summary: str | SummaryResponse | None = None, **extra: Any) -> CompactResult:
        """Finish the compaction.

        Args:
            summary: The summarizer's reply for the (last) chunk: a ``str`` (the part inside
                ``<summary>`` tags is used), a :class:`SummaryResponse`, or ``None`` for the
                built-in rule summary. Ignored when :attr:`request` is ``None``.

        Returns:
            The :class:`CompactResult`. Must-keep facts missing from the summary are appended, the
            summary is capped at ``summary_max_tokens``, and the budget ladder runs.
        """
        truncated = False
        if isinstance(summary, SummaryResponse):
            truncated = bool(summary.truncated)
            summary = summary.text
        if summary is not None and not isinstance(summary, str):
            raise SummarizerError(f"apply expects a str, SummaryResponse or None, got {type(summary).__name__}")
        d = self._core_plan.apply(summary, truncated, self._tokenizer)
        if self.target_ratio is not None:
            extra.setdefault("target_ratio", self.target_ratio)
        result = result_of(d, **extra)
        if self._on_applied is not None:
            self._on_applied(result)
        return result

    def _dry_apply(self, summary: str | None) -> CompactResult:
        """:meth:`apply` without ``on_applied``: what ``summary`` would give, to decide whether to ask
        for one (the core tells a state it was planned with as :meth:`apply` does: call it only where
        the real :meth:`apply` follows, as a background job's does)."""
        return result_of(self._core_plan.apply(summary, False, self._tokenizer))

    def __repr__(self) -> str:
        r = self.request
        if r is None:
            return f"CompactionPlan(request=None, reason={self.reason!r})"
        return (
            f"CompactionPlan(replaced_count={r.replaced_count}, chunk={r.chunk + 1}/{r.chunks}, "
            f"language={r.language!r})"
        )
