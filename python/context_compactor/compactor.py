"""`ContextCompactor`: the immutable, thread-safe entry point, and `CompactionCheck`.

`compact` and `acompact` drive (`_drive`, `_adrive`) the one generator that carries out the core
driver's decisions (`_driver.steps`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from context_compactor import _core, _driver
from context_compactor import telemetry as _otel
from context_compactor._recall_scope import check_recall
from context_compactor._summarize import Deadline, call_async, call_hook_sync, call_sync
from context_compactor.batch import BatchMethods
from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError
from context_compactor.plan import CompactionPlan
from context_compactor.results import AutoTarget, CompactResult
from context_compactor.tokens import TokenCounter

log = logging.getLogger("context_compactor")

Pinned = Iterable[int] | Callable[[int, Any], bool] | None

__all__ = ["CompactionCheck", "ContextCompactor"]

Urgency = Literal["none", "soft", "hard"]


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
        """The compaction, once for both drivers (:func:`_driver.steps`): yields ``("hook", (fn,
        arg))`` and ``("summarize", request)``; the sync or async driver performs them and sends
        back the value (or throws the exception in). ``plan``: already planned (``compact_many``)."""
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
        return (
            yield from _driver.steps(
                plan,
                messages,
                system=system,
                config=self._config,
                summarizer=self.summarizer,
                on_before_compact=self.on_before_compact,
                on_compacted=self.on_compacted,
                state=state,
            )
        )

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
