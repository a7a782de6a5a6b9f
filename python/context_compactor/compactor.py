"""`ContextCompactor`: the immutable, thread-safe entry point, and `CompactionCheck`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from context_compactor import _core
from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError
from context_compactor.tokens import TokenCounter

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
        budget: ``max_context_tokens - reserve_tokens``.
        target_tokens: Where a compaction would aim.
        raw_tokens: The count before calibration.
        calibration: The ratio applied (1.0 without a state or before any usage was observed).
        message_count: Number of messages.
        micro_due: Whether automatic micro-compaction would run (``micro_trigger_ratio``).
        format: The detected (or given) format.
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

    @property
    def usage_ratio(self) -> float:
        """``current_tokens / budget``."""
        return self.current_tokens / self.budget if self.budget else 0.0


class ContextCompactor:
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

    __slots__ = ("_config", "_counter", "on_before_compact", "on_compacted", "summarizer")

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
        object.__setattr__(
            self,
            "_counter",
            TokenCounter(
                config.tokenizer,
                message_overhead_tokens=config.message_overhead_tokens,
                image_tokens=config.image_tokens,
            ),
        )
        object.__setattr__(self, "summarizer", summarizer)
        object.__setattr__(self, "on_before_compact", on_before_compact)
        object.__setattr__(self, "on_compacted", on_compacted)

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
        cfg = self._config
        counts = self._counter.count_each(messages, system=system, tools=tools, format=format, state=state)
        raw = counts.total
        current = counts.calibrated_total
        if current >= cfg.hard_threshold:
            urgency: Urgency = "hard"
        elif current >= cfg.soft_threshold:
            urgency = "soft"
        else:
            urgency = "none"
        return CompactionCheck(
            should_compact=urgency != "none",
            urgency=urgency,
            current_tokens=current,
            threshold=cfg.soft_threshold,
            hard_threshold=cfg.hard_threshold,
            budget=cfg.budget,
            target_tokens=cfg.target_tokens,
            raw_tokens=raw,
            calibration=state.calibration if state is not None else 1.0,
            message_count=len(counts.messages),
            micro_due=current >= cfg.micro_threshold,
            format=counts.format,
        )

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

    def __repr__(self) -> str:
        c = self._config
        return (
            f"ContextCompactor(max_context_tokens={c.max_context_tokens}, soft={c.soft_threshold}, "
            f"hard={c.hard_threshold}, tokenizer={self._counter.name!r}, summarizer={self.summarizer is not None})"
        )
