"""Performing the core driver's steps (``_core.Driver``, ``src/driver/``) on Python objects: the
plan, the preview, the hooks, the guard against messages changed in place. One generator,
:func:`steps`, run by ``ContextCompactor.compact``/``acompact`` (``_drive``/``_adrive``),
``compact_many`` and a Session's background jobs (``_background.Job``, with :class:`Background`):
the chunk loop, the failure classes, the fallback to the rule summary and the cool-down exist
once, in the core, for all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from context_compactor import _core
from context_compactor._provider_items import place_items, span_of
from context_compactor._summarize import check_reply, classify, describe
from context_compactor.config import CompactionConfig
from context_compactor.errors import SummarizerError
from context_compactor.plan import CompactionPlan
from context_compactor.results import CompactionPreview, CompactResult, SummaryRequest, SummaryResponse, candidates_of

log = logging.getLogger("context_compactor")


def _plain(message: Any) -> Any:
    """A comparable copy of a message that has no cheap fingerprint (str subclasses such as a
    ``StrEnum`` role, objects without ``__dict__``): plain values, containers, object fields.
    Cycles are cut; a message of more than a million values raises ``OverflowError``."""
    budget = [1_000_000]
    path: set[int] = set()

    def walk(value: Any) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError("message too large to compare")
        # The base classes' methods read subclasses' values without running their overrides.
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return (type(value), int.__index__(value))
        if isinstance(value, str):
            return (type(value), str.__str__(value))
        if isinstance(value, float):
            return (type(value), float.__repr__(value))
        if isinstance(value, bytes):
            return (type(value), bytes.hex(value))
        if id(value) in path:
            return ("cycle", id(value))
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return ("dict", tuple((walk(k), walk(v)) for k, v in value.items()))
            if isinstance(value, (list, tuple)):
                return (type(value), tuple(walk(v) for v in value))
            fields = getattr(value, "__dict__", None)
            if isinstance(fields, dict):
                return (type(value), walk(fields), walk(getattr(value, "__pydantic_extra__", None)))
            return ("object", id(value))
        finally:
            path.discard(id(value))

    return walk(message)


class _InputGuard:
    """What the messages given to ``compact()`` were before user code (the summarizer, the
    ``on_before_compact`` hook) ran, to tell whether it changed one of them in place."""

    __slots__ = ("_items", "_marks")

    def __init__(self, messages: Sequence[Any]) -> None:
        self._items = list(messages)
        fingerprints = _core.message_fingerprints(self._items)
        self._marks = [fp if fp else self._plain(m) for m, fp in zip(self._items, fingerprints, strict=True)]

    @staticmethod
    def _plain(m: Any) -> Any:
        try:
            return ("plain", _plain(m))
        except Exception:  # an object that cannot even be read: it cannot be checked either
            return ("unreadable", id(m))

    def check(self, who: str) -> None:
        """Raise :class:`SummarizerError` when a message was changed in place since."""
        fingerprints = _core.message_fingerprints(self._items)
        for i, (m, fp, mark) in enumerate(zip(self._items, fingerprints, self._marks, strict=True)):
            if (fp if isinstance(mark, int) else self._plain(m)) != mark:
                raise SummarizerError(
                    f"{who} changed message {i} of the conversation being compacted (in place) while "
                    "compact() was running; the compaction was planned on the messages as they were, so "
                    "its result would not match them and could be invalid. Summarizers and hooks must not "
                    "modify the messages (copy them first); no result was returned and the messages are "
                    "as your code left them."
                )


def _unchanged(messages: Sequence[Any], system: Any, plan: CompactionPlan, reason: str) -> CompactResult:
    n = len(messages)
    return CompactResult(
        messages=list(messages),
        system=system,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_before,
        original_count=n,
        retained_count=n,
        strategy="none",
        reason=reason,
    )


def done(config: CompactionConfig, result: CompactResult) -> CompactResult:
    if result.compacted:
        log.info(
            "compacted: strategy=%s tokens %d -> %d, %d messages replaced%s",
            result.strategy,
            result.tokens_before,
            result.tokens_after,
            result.compacted_count,
            ", OVER BUDGET" if result.over_budget else "",
        )
        if config.log_content and result.summary:
            log.debug("summary: %s", result.summary)
    return result


@dataclass(frozen=True)
class Background:
    """How a Session's background job (``_background.Job``) runs :func:`steps`: without hooks
    (the Session calls them), without the in-place-change guard (the snapshot's messages are the
    Session's), and without touching the conversation state from the job's thread: the Session
    starts the cool-down when it applies the job's result.

    Attributes:
        previous: Applied to the first chunk's request (not a native strategy's): puts a summary
            that arrived too late before its previous summary (``_background.with_previous``).
        flushed: Memories the Session's ``on_before_compact`` hook reported before the job.
        on_fallback: Told the failure a fallback follows and the cool-down the core's driver
            names for it (calls), when the rule summary is applied in place of the summary.
    """

    previous: Callable[[SummaryRequest], SummaryRequest] | None
    flushed: int
    on_fallback: Callable[[BaseException | None, int], None]


def steps(
    plan: CompactionPlan,
    messages: Sequence[Any],
    *,
    system: Any,
    config: CompactionConfig,
    summarizer: Callable[..., Any] | None,
    on_before_compact: Callable[..., Any] | None,
    on_compacted: Callable[..., Any] | None,
    state: _core.ConversationState | None,
    background: Background | None = None,
) -> Generator[tuple[str, Any], Any, CompactResult]:
    """The compaction of ``plan`` (made from ``messages``): yields ``("hook", (fn, arg))`` and
    ``("summarize", request)``; the sync or async driver performs them and sends back the value
    (or throws the exception in). ``background``: a background job's (see :class:`Background`).

    The steps are decided by the core's driver (``_core.Driver``, ``src/driver/``: the fallback
    ladder, the failure policy, the cool-down, the chunk loop, the hooks and the veto), shared
    with the Rust API; this performs them on Python objects: the plan, the preview, the callables
    and the guard against messages changed in place."""
    # The request (and the transcript behind it) only when someone reads it: the summarizer
    # or the hook's preview. The rule summary does not need it.
    wants_request = summarizer is not None or on_before_compact is not None
    request = plan.request if wants_request else None
    preview = CompactionPreview(
        messages,
        plan.tokens_before,
        request,
        request.replaced_count if request else 0,
        _candidates=candidates_of(plan),
    )
    if background is not None:
        preview._flushed = background.flushed
    driver = _core.Driver(
        config,
        has_request=request is not None,
        summarizer=summarizer is not None,
        before_hook=on_before_compact is not None,
        after_hook=on_compacted is not None,
        has_state=state is not None or background is not None,
    )
    result: CompactResult | None = None
    early = False  # the result was applied before the hooks (no request)
    guard: _InputGuard | None = None  # what the messages were before user code ran
    current = plan  # advanced by each chunk's summary
    usages: list[Any] = []
    replied = False  # the apply due is of the summarizer's reply
    error: BaseException | None = None  # the failure a fallback or an error follows
    step = driver.resume()
    while True:
        kind = step.kind
        if early and kind in ("after_hook", "done"):
            assert result is not None
            result = replace(result, flushed_memories=preview._flushed)
            early = False
        if kind == "apply":
            if request is None and result is None:
                result = plan.apply(None, flushed_memories=preview._flushed)  # 0 before a hook
                early = result.compacted
            elif step.fallback_reason is not None:
                log.warning(
                    "summarizer failed (%s, %s); falling back to the built-in rule summary",
                    step.failure_kind,
                    step.fallback_reason,
                )
                if background is not None:
                    background.on_fallback(error, step.cooldown_calls)
                elif state is not None and step.cooldown_calls:
                    _core.start_cooldown(state, step.cooldown_calls)
                result = current.apply(None, fallback_reason=step.fallback_reason, flushed_memories=preview._flushed)
            elif replied:
                try:
                    result = current.apply(
                        SummaryResponse(step.text or "", step.truncated),
                        flushed_memories=preview._flushed,
                        summary_usage=tuple(usages),
                    )
                except SummarizerError:
                    raise
                except Exception as e:
                    error, step = e, driver.fail(classify(e), describe(e))
                    continue
            else:  # the hook's summary, or the rule summary
                result = plan.apply(step.text, flushed_memories=preview._flushed)
            step = driver.applied(result.compacted)
        elif kind == "before_hook":
            if guard is None:
                guard = _InputGuard(messages)
            yield ("hook", (on_before_compact, preview))
            guard.check("the on_before_compact hook")
            veto = (preview._veto or "vetoed") if preview.vetoed else None
            step = driver.hook_done(veto=veto, summary=preview._summary)
        elif kind == "summarize":
            if guard is None and background is None:
                guard = _InputGuard(messages)
            try:
                ask = current.request
                if current is plan and ask is not None:
                    if getattr(summarizer, "wants_span", False):
                        # A native strategy: the provider gets the span itself (its items replace
                        # it whole); a late summary cannot be handed to it.
                        ask = replace(ask, span=span_of(plan, messages))
                    elif background is not None and background.previous is not None:
                        ask = background.previous(ask)
                try:
                    reply = yield ("summarize", ask)
                except Exception:
                    if guard is not None:
                        guard.check("the summarizer")
                    raise
                if guard is not None:
                    guard.check("the summarizer")
                if isinstance(reply, SummaryResponse) and reply.items is not None:
                    # A native strategy: the provider's items replace the whole span at once.
                    usages.append(reply.usage)
                    result = place_items(plan, reply, flushed_memories=preview._flushed, summary_usage=tuple(usages))
                    step = driver.items_placed()
                    continue
                text, truncated, usage = check_reply(reply)
                usages.append(usage)
                remaining = current.remaining_chunks
            except SummarizerError:
                raise
            except Exception as e:
                # A failure at a later chunk keeps the chunks summarised before it: the
                # fallback applies the rule summary to `current`, the rest only.
                error, step = e, driver.fail(classify(e), describe(e))
                continue
            replied = remaining == 0
            step = driver.reply(text, truncated, remaining)
        elif kind == "advance":
            try:
                current = current.advance(step.text or "")
            except SummarizerError:
                raise
            except Exception as e:
                replied = False
                error, step = e, driver.fail(classify(e), describe(e))
                continue
            step = driver.resume()
        elif kind == "after_hook":
            yield ("hook", (on_compacted, result))
            step = driver.resume()
        elif kind == "unchanged":
            return _unchanged(messages, system, plan, step.text or "vetoed")
        elif kind == "raise":
            raise SummarizerError(step.text) from error
        else:
            assert result is not None
            return done(config, result)
