"""`ContextCompactor`: the immutable, thread-safe entry point, and `CompactionCheck`.

Over 600 lines on purpose: this is the class a user reads first (the first entry of the API
reference), and `_steps`, the one generator that carries out the core driver's decisions, is
driven by both `compact` and `acompact` and needs the class's private helpers.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from context_compactor import _core
from context_compactor import telemetry as _otel
from context_compactor._provider_items import place_items, span_of
from context_compactor._recall_scope import check_recall
from context_compactor._summarize import (
    Deadline,
    call_async,
    call_hook_sync,
    call_sync,
    check_reply,
    classify,
    describe,
)
from context_compactor.batch import BatchMethods
from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError, SummarizerError
from context_compactor.plan import CompactionPlan
from context_compactor.results import AutoTarget, CompactionPreview, CompactResult, SummaryResponse, candidates_of
from context_compactor.tokens import TokenCounter

log = logging.getLogger("context_compactor")

Pinned = Iterable[int] | Callable[[int, Any], bool] | None

__all__ = ["CompactionCheck", "ContextCompactor"]

Urgency = Literal["none", "soft", "hard"]


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


@dataclass(frozen=True)
class CompactionCheck:
    """Where a conversation stands against its window.

    Attributes:
        should_compact: ``urgency != "none"``.
        urgency: ``"none"`` below the soft threshold; ``"soft"`` from it (compact now or at the end
            of the turn); ``"hard"`` from the hard threshold (compact before sending).
        current_tokens: The request's tokens (calibrated when the state learned a ratio).
        threshold: The soft threshold.
        hard_threshold: The hard threshold.
        budget: ``max_context_tokens - reserve`` (over it is over the window).
        target_tokens: Where a compaction would aim.
        raw_tokens: The count before calibration.
        calibration: The ratio applied (1.0 without a state or before any usage was observed).
        message_count: Number of messages.
        micro_due: Whether automatic micro-compaction would run (``micro_trigger_ratio``).
        format: The detected (or given) format.
        held_until: Over the soft threshold but held (``urgency`` is ``"none"``): the last
            compaction with this state could not get under the soft threshold, so none is due
            until the context reaches this many tokens (``retry_growth_tokens`` more) or the hard
            threshold. ``None`` when nothing is held.
    """

    should_compact: bool
    urgency: Urgency
    current_tokens: int
    threshold: int
    hard_threshold: int
    budget: int
    target_tokens: int
    raw_tokens: int
    calibration: float
    message_count: int
    micro_due: bool
    format: str
    held_until: int | None = None

    @property
    def usage_ratio(self) -> float:
        """``current_tokens / budget``."""
        return self.current_tokens / self.budget if self.budget else 0.0


def _rebuild(config: CompactionConfig, summarizer: Any, before: Any, after: Any) -> ContextCompactor:
    return ContextCompactor(config, summarizer=summarizer, on_before_compact=before, on_compacted=after)


class ContextCompactor(BatchMethods):
    """Keeps a conversation inside the model's window. Immutable and thread-safe: anything that
    remembers between calls lives in a :class:`ConversationState` you pass as ``state=``.

    Args:
        config: A :class:`CompactionConfig` (defaults when omitted).
        summarizer: Your LLM call, ``SummaryRequest -> str | SummaryResponse`` (sync or async).
            Without one, compaction uses the built-in rule summary.
        on_before_compact: Hook called with a preview before a compaction (may veto).
        on_compacted: Hook called with the result after a compaction.
        **overrides: Any :class:`CompactionConfig` field.

    Example:
        >>> from context_compactor import ContextCompactor
        >>> compactor = ContextCompactor(max_context_tokens=200_000)
        >>> check = compactor.check([{"role": "user", "content": "hello"}])
        >>> check.urgency, check.should_compact
        ('none', False)
    """

    __slots__ = ("_config", "_counter", "_limits", "on_before_compact", "on_compacted", "summarizer")
    # Set once in __init__ through object.__setattr__ (the instance is immutable).
    _config: CompactionConfig
    _counter: TokenCounter
    #: soft, hard, budget, target, micro thresholds.
    _limits: tuple[int, int, int, int, int]
    summarizer: Callable[..., Any] | None
    on_before_compact: Callable[..., Any] | None
    on_compacted: Callable[..., Any] | None

    def __init__(
        self,
        config: CompactionConfig | None = None,
        *,
        summarizer: Callable[..., Any] | None = None,
        on_before_compact: Callable[..., Any] | None = None,
        on_compacted: Callable[..., Any] | None = None,
        **overrides: Any,
    ) -> None:
        if config is None:
            config = CompactionConfig.from_dict(overrides) if overrides else CompactionConfig()
        elif not isinstance(config, CompactionConfig):
            raise ConfigError(f"config: expected a CompactionConfig, got {type(config).__name__}", "config")
        elif overrides:
            config = config.replace(**overrides)
        for name, fn in (
            ("summarizer", summarizer),
            ("on_before_compact", on_before_compact),
            ("on_compacted", on_compacted),
        ):
            if fn is not None and not callable(fn):
                raise ConfigError(f"{name}: expected a callable, got {fn!r}", name)
        object.__setattr__(self, "_config", config)
        # The thresholds check() compares with, worked out once (the config is immutable).
        object.__setattr__(
            self,
            "_limits",
            (config.soft_threshold, config.hard_threshold, config.budget, config.target_tokens, config.micro_threshold),
        )
        object.__setattr__(
            self,
            "_counter",
            TokenCounter(
                config.tokenizer,
                message_overhead_tokens=config.message_overhead_tokens,
                image_tokens=config.image_tokens,
                image_model=config.image_model,
            ),
        )
        object.__setattr__(self, "summarizer", summarizer)
        object.__setattr__(self, "on_before_compact", on_before_compact)
        object.__setattr__(self, "on_compacted", on_compacted)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles (Ray, process pools) as its config and callables: a summarizer or hook given
        # must pickle too (a module-level function does; a lambda does not).
        return (_rebuild, (self._config, self.summarizer, self.on_before_compact, self.on_compacted))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ContextCompactor is immutable; use .with_config(...) (tried to set {name!r})")

    @property
    def config(self) -> CompactionConfig:
        """The configuration (immutable)."""
        return self._config

    @property
    def counter(self) -> TokenCounter:
        """The token counter the configuration selects."""
        return self._counter

    def with_config(self, **changes: Any) -> ContextCompactor:
        """A compactor with some configuration fields changed, the same summarizer and hooks."""
        return ContextCompactor(
            self._config.replace(**changes),
            summarizer=self.summarizer,
            on_before_compact=self.on_before_compact,
            on_compacted=self.on_compacted,
        )

    def check(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        state: _core.ConversationState | None = None,
    ) -> CompactionCheck:
        """Count the request and compare it with the thresholds. Never raises for provider-invalid
        (but well-typed) input; wrong Python types raise :class:`MessageTypeError`.

        With a ``state``, only messages not counted before are counted, and the calibration it
        learned from :meth:`ConversationState.observe_usage` is applied.
        """
        counts = self._counter.count_each(messages, system=system, tools=tools, format=format, state=state)
        if state is None:
            return self._verdict(counts.calibrated_total, counts.total, 1.0, counts.message_count, counts.format)
        current = counts.calibrated_total
        state.note_context(current)
        return self._verdict(
            current,
            counts.total,
            state.calibration,
            counts.message_count,
            counts.format,
            state.hold_until,
            state.due_at,
        )

    def _verdict(
        self,
        current: int,
        raw: int,
        calibration: float,
        message_count: int,
        format: str,
        hold_until: int | None = None,
        due_at: int | None = None,
    ) -> CompactionCheck:
        """The :class:`CompactionCheck` of a request of ``current`` (calibrated) tokens;
        ``hold_until``: the state's hold (:attr:`ConversationState.hold_until`); ``due_at``: its
        due point under ``target_ratio="auto"`` (:attr:`ConversationState.due_at`)."""
        soft, hard, budget, target, micro = self._limits
        if due_at is not None:
            soft = min(soft, due_at)
        held = None
        if current >= hard:
            urgency: Urgency = "hard"
        elif current >= soft:
            urgency = "soft"
            if hold_until is not None and current < hold_until:
                # The last compaction could not get under the soft threshold: another now would
                # end the same way (no compaction loops; ``retry_growth_tokens``).
                urgency, held = "none", hold_until
        else:
            urgency = "none"
        # Built by filling the instance dict: check() runs on every agent step, and the frozen
        # dataclass's __init__ (twelve object.__setattr__ calls) was a third of a warm check of
        # a short conversation.
        result = object.__new__(CompactionCheck)
        result.__dict__.update(
            should_compact=urgency != "none",
            urgency=urgency,
            current_tokens=current,
            threshold=soft,
            hard_threshold=hard,
            budget=budget,
            target_tokens=target,
            raw_tokens=raw,
            calibration=calibration,
            message_count=message_count,
            micro_due=current >= micro,
            format=format,
            held_until=held,
        )
        return result

    def should_compact(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        state: _core.ConversationState | None = None,
    ) -> bool:
        """``check(...).should_compact``."""
        return self.check(messages, system=system, tools=tools, format=format, state=state).should_compact

    # -- planning -----------------------------------------------------------------------------------

    def _pinned(self, messages: Sequence[Any], pinned: Pinned) -> list[bool] | None:
        if pinned is None:
            return None
        n = len(messages)
        flags = [False] * n
        if callable(pinned):
            for i, m in enumerate(messages):
                flags[i] = bool(pinned(i, m))
            return flags
        for i in pinned:
            if isinstance(i, bool) or not isinstance(i, int):
                raise ConfigError(f"pinned: expected message indices or a predicate, got {i!r}", "pinned")
            if not -n <= i < n:
                raise ConfigError(f"pinned: index {i} is out of range for {n} messages", "pinned")
            flags[i] = True
        return flags

    def plan(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        force: bool = False,
        instructions: str | None = None,
        pinned: Pinned = None,
        state: _core.ConversationState | None = None,
    ) -> CompactionPlan:
        """Plan a compaction without calling any LLM (bring your own call).

        Repairs invalid input (``repair=True``), runs micro-compaction and the selective rules,
        chooses a legal cut, and returns the :class:`CompactionPlan` whose ``request`` is what to
        summarise (``None`` when no summary is needed). ``force=True`` ignores the thresholds
        (the ``/compact`` command). ``pinned``: message indices, or a predicate
        ``(index, message) -> bool``; pinned messages (and their whole tool block) are kept.
        """
        check_recall(self._config.recall, self._config.offload_dir)
        config, auto = self._config, None
        if config.target_ratio == "auto":
            auto = self.auto_target(messages, system=system, tools=tools, format=format, state=state)
            config = config.replace(target_ratio=auto.ratio)
        core = _core.plan(
            messages,
            config=config,
            system=system,
            tools=tools,
            format=format,
            pinned=self._pinned(messages, pinned),
            mode="force" if force else "auto",
            instructions=instructions,
            state=state,
        )
        on_applied = None
        if auto is not None and state is not None:
            on_applied = functools.partial(self._set_due, state, auto)
        return CompactionPlan(
            core,
            self._config.tokenizer,
            target_ratio=auto.ratio if auto else float(config.target_ratio),
            on_applied=on_applied,
        )

    def _set_due(self, state: _core.ConversationState, auto: AutoTarget, result: CompactResult) -> None:
        """``target_ratio="auto"``: after a compaction that changed the context (micro-compaction
        alone included: it rewrites the cached prefix from what it cleared, so a new cycle starts)
        and got under the soft threshold, the next one is due from
        :func:`context_compactor._core.due_at` (the state's ``due_at``)."""
        if result.strategy == "none" or result.over_budget or state.hold_until is not None:
            return
        soft = self._config.soft_threshold
        state.set_due_at(
            _core.due_at(result.tokens_after, soft=soft, fixed=auto.fixed, growth=auto.growth, prices=auto.prices)
        )

    def auto_target(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        state: _core.ConversationState | None = None,
    ) -> AutoTarget:
        """The target ``target_ratio="auto"`` chooses for these messages now (whatever the
        configured ``target_ratio``): the one that minimises the predicted billed input per model
        call over a compaction cycle, from the growth per call ``state`` observed, the
        :meth:`CompactionConfig.price_table` of the conversation's format and whether a summarizer
        is set, bounded to 0.2-0.7 of the budget and never below what keeps the recent tail, the
        task, the ledger (the one the context carries and the user's words the compaction moves
        into it) and the summary. Without an observed growth, or when what keeps those is over
        0.7 of the budget (no target within the bounds keeps it): half the budget."""
        ratio, tokens, floor, growth, cost, fixed, prices = _core.auto_target(
            messages,
            config=self._config,
            system=system,
            tools=tools,
            format=format,
            state=state,
            llm=self.summarizer is not None,
        )
        return AutoTarget(ratio, tokens, floor, growth, cost, fixed, tuple(prices))

    def micro_compact(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        pinned: Pinned = None,
        state: _core.ConversationState | None = None,
    ) -> CompactResult:
        """Micro-compaction only, whatever the thresholds: tool results older than the last
        ``keep_recent_tool_results`` become placeholders and older long arguments are cut
        (protected tools, the kept head and the recent tail untouched). No LLM."""
        check_recall(self._config.recall, self._config.offload_dir)
        core = _core.plan(
            messages,
            config=self._config,
            system=system,
            tools=tools,
            format=format,
            pinned=self._pinned(messages, pinned),
            mode="micro",
            state=state,
        )
        return CompactionPlan(core, self._config.tokenizer).apply(None)

    # -- compaction -----------------------------------------------------------------------------------

    def _unchanged(self, messages: Sequence[Any], system: Any, plan: CompactionPlan, reason: str) -> CompactResult:
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

    def _done(self, result: CompactResult) -> CompactResult:
        if result.compacted:
            log.info(
                "compacted: strategy=%s tokens %d -> %d, %d messages replaced%s",
                result.strategy,
                result.tokens_before,
                result.tokens_after,
                result.compacted_count,
                ", OVER BUDGET" if result.over_budget else "",
            )
            if self._config.log_content and result.summary:
                log.debug("summary: %s", result.summary)
        return result

    def _steps(
        self,
        messages: Sequence[Any],
        *,
        system: Any,
        tools: Sequence[Any] | None,
        format: str | None,
        force: bool,
        instructions: str | None,
        pinned: Pinned,
        state: _core.ConversationState | None,
        plan: CompactionPlan | None = None,
    ) -> Generator[tuple[str, Any], Any, CompactResult]:
        """The compaction, once for both drivers: yields ``("hook", (fn, arg))`` and
        ``("summarize", request)``; the sync or async driver performs them and sends back the
        value (or throws the exception in). ``plan``: already planned (``compact_many``).

        The steps are decided by the core's driver (``_core.Driver``, ``src/driver/``: the
        fallback ladder, the failure policy, the cool-down, the chunk loop, the hooks and the
        veto), shared with the Rust API; this performs them on Python objects: the plan, the
        preview, the callables and the guard against messages changed in place."""
        if plan is None:
            plan = self.plan(
                messages,
                system=system,
                tools=tools,
                format=format,
                force=force,
                instructions=instructions,
                pinned=pinned,
                state=state,
            )
        # The request (and the transcript behind it) only when someone reads it: the summarizer
        # or the hook's preview. The rule summary does not need it.
        wants_request = self.summarizer is not None or self.on_before_compact is not None
        request = plan.request if wants_request else None
        preview = CompactionPreview(
            messages,
            plan.tokens_before,
            request,
            request.replaced_count if request else 0,
            _candidates=candidates_of(plan),
        )
        driver = _core.Driver(
            self._config,
            has_request=request is not None,
            summarizer=self.summarizer is not None,
            before_hook=self.on_before_compact is not None,
            after_hook=self.on_compacted is not None,
            has_state=state is not None,
        )
        result: CompactResult | None = None
        early = False  # the result was applied before the hooks (no request)
        guard: _InputGuard | None = None  # what the messages were before user code ran
        current = plan  # advanced by each chunk's summary
        usages: list[Any] = []
        replied = False  # the apply due is of the summarizer's reply
        error: Exception | None = None  # the failure a fallback or an error follows
        step = driver.resume()
        while True:
            kind = step.kind
            if early and kind in ("after_hook", "done"):
                assert result is not None
                result = replace(result, flushed_memories=preview._flushed)
                early = False
            if kind == "apply":
                if request is None and result is None:
                    result = plan.apply(None)
                    early = result.compacted
                elif step.fallback_reason is not None:
                    log.warning(
                        "summarizer failed (%s, %s); falling back to the built-in rule summary",
                        step.failure_kind,
                        step.fallback_reason,
                    )
                    if state is not None and step.cooldown_calls:
                        _core.start_cooldown(state, step.cooldown_calls)
                    result = current.apply(
                        None, fallback_reason=step.fallback_reason, flushed_memories=preview._flushed
                    )
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
                yield ("hook", (self.on_before_compact, preview))
                guard.check("the on_before_compact hook")
                veto = (preview._veto or "vetoed") if preview.vetoed else None
                step = driver.hook_done(veto=veto, summary=preview._summary)
            elif kind == "summarize":
                if guard is None:
                    guard = _InputGuard(messages)
                try:
                    ask = current.request
                    if current is plan and ask is not None and getattr(self.summarizer, "wants_span", False):
                        ask = replace(ask, span=span_of(plan, messages))
                    try:
                        reply = yield ("summarize", ask)
                    except Exception:
                        guard.check("the summarizer")
                        raise
                    guard.check("the summarizer")
                    if isinstance(reply, SummaryResponse) and reply.items is not None:
                        # A native strategy: the provider's items replace the whole span at once.
                        usages.append(reply.usage)
                        result = place_items(
                            plan, reply, flushed_memories=preview._flushed, summary_usage=tuple(usages)
                        )
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
                yield ("hook", (self.on_compacted, result))
                step = driver.resume()
            elif kind == "unchanged":
                return self._unchanged(messages, system, plan, step.text or "vetoed")
            elif kind == "raise":
                raise SummarizerError(step.text) from error
            else:
                assert result is not None
                return self._done(result)

    def compact(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        force: bool = False,
        instructions: str | None = None,
        pinned: Pinned = None,
        state: _core.ConversationState | None = None,
    ) -> CompactResult:
        """Compact if due (or always with ``force=True``), calling the summarizer synchronously.

        The ladder: micro → selective rules → a summary of the span between the kept head and
        tail (your summarizer, else the built-in rule summary; on a transient failure, timeout,
        empty or error-like reply: the rule summary, with ``fallback_reason`` set) → fewer tail
        messages → truncation; ``over_budget=True`` if still above the soft threshold. The input
        is never modified. An async summarizer or hook needs :meth:`acompact`.

        The result is built from the messages as they were when ``compact()`` was called; your
        summarizer and ``on_before_compact`` hook must not modify them. Changing the list itself
        meanwhile (another task appending to it) does not affect the result, which then lacks the
        new messages. Changing a message object in place (say, popping its ``tool_calls``) would
        leave the result miscounted or invalid for the provider, since kept messages are returned
        as the same objects: ``compact()`` checks for that after the hook and after each
        summarizer call and raises :class:`SummarizerError` naming the message (whatever
        ``on_summarizer_error`` says, since no fallback can be built on changed messages); no
        result is returned, no cool-down starts, and the messages stay as your code left them.
        """
        steps = self._steps(
            messages,
            system=system,
            tools=tools,
            format=format,
            force=force,
            instructions=instructions,
            pinned=pinned,
            state=state,
        )
        if _otel.TRACER is None:
            return self._drive(steps)
        return _otel.compact(self, self._drive, steps, force)

    def _drive(self, steps: Generator[tuple[str, Any], Any, CompactResult]) -> CompactResult:
        """Run :meth:`_steps` with sync hooks and summarizer calls."""
        value: Any = None
        error: BaseException | None = None
        deadline = Deadline(self._config.summarizer_timeout_s)
        while True:
            try:
                kind, arg = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, error = None, None
            try:
                if kind == "hook":
                    fn, payload = arg
                    call_hook_sync(fn, payload, "await compactor.acompact(...)")
                else:
                    value = call_sync(self.summarizer, arg, deadline)  # type: ignore[arg-type]
            except BaseException as e:
                error = e

    async def acompact(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        force: bool = False,
        instructions: str | None = None,
        pinned: Pinned = None,
        state: _core.ConversationState | None = None,
    ) -> CompactResult:
        """:meth:`compact` for async code: async (or sync, run in a worker thread) summarizers and
        hooks, ``asyncio.wait_for`` timeouts. Cancelling it propagates ``CancelledError`` and
        applies nothing. A summarizer or hook that changes a message in place while it runs raises
        :class:`SummarizerError`, as in :meth:`compact`."""
        steps = self._steps(
            messages,
            system=system,
            tools=tools,
            format=format,
            force=force,
            instructions=instructions,
            pinned=pinned,
            state=state,
        )
        if _otel.TRACER is None:
            return await self._adrive(steps)
        return await _otel.acompact(self, self._adrive, steps, force)

    async def _adrive(self, steps: Generator[tuple[str, Any], Any, CompactResult]) -> CompactResult:
        """Run :meth:`_steps` with sync or async hooks and summarizer calls."""
        value: Any = None
        error: BaseException | None = None
        deadline = Deadline(self._config.summarizer_timeout_s)
        while True:
            try:
                kind, arg = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, error = None, None
            try:
                if kind == "hook":
                    fn, payload = arg
                    r = fn(payload)
                    if inspect.isawaitable(r):
                        await r
                else:
                    value = await call_async(self.summarizer, arg, deadline)  # type: ignore[arg-type]
            except asyncio.CancelledError:
                steps.close()
                raise
            except BaseException as e:
                error = e

    def pydantic_ai_processor(self, *, asynchronous: bool = False, with_context: bool = False) -> Callable[..., Any]:
        """A pydantic-ai history processor: ``Agent(..., capabilities=[ProcessHistory(
        compactor.pydantic_ai_processor())])``. Needs the ``[pydantic-ai]`` extra; see
        :func:`context_compactor.integrations.pydantic_ai.history_processor`."""
        from context_compactor.integrations.pydantic_ai import history_processor

        return history_processor(self, asynchronous=asynchronous, with_context=with_context)

    def __repr__(self) -> str:
        c = self._config
        return (
            f"ContextCompactor(max_context_tokens={c.max_context_tokens}, soft={c.soft_threshold}, "
            f"hard={c.hard_threshold}, tokenizer={self._counter.name!r}, summarizer={self.summarizer is not None})"
        )
