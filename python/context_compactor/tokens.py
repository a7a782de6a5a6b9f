"""`TokenCounter`: one interface over the estimate, exact BPE, and your own counter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from context_compactor import _core
from context_compactor.errors import ConfigError

__all__ = ["TokenCounter"]

BUILTIN = ("approx", "o200k_base", "cl100k_base")


class TokenCounter:
    """Counts tokens of texts and of whole requests.

    Args:
        kind: ``"approx"`` (the fast estimate that errs high, the default), ``"o200k_base"`` or
            ``"cl100k_base"`` (exact, offline), or any callable ``str -> int`` (for example a
            Hugging Face tokenizer's ``lambda s: len(tok.encode(s))``).
        message_overhead_tokens: Tokens each message adds for its role and separators.
        image_tokens: Tokens counted for each image whose size is unknown (given by URL or file
            id), and for each audio clip or opaque document.
        image_model: The model whose documented image formula counts images whose size is read
            from their base64 data (``"gpt-4o"``, ``"gpt-5.4-mini"``, ``"claude-opus-4-8"``,
            ``"gemini-3-pro"``, ...); ``None`` counts the highest documented count for the
            image's provider.

    Example:
        >>> from context_compactor import TokenCounter
        >>> counter = TokenCounter("o200k_base")
        >>> counter.count("hello world")
        2
        >>> counter.count_messages([{"role": "user", "content": "hello world"}])
        6
    """

    __slots__ = ("_callable", "_name", "image_model", "image_tokens", "message_overhead_tokens")

    def __init__(
        self,
        kind: str | Callable[[str], int] = "approx",
        *,
        message_overhead_tokens: int = 4,
        image_tokens: int = 1600,
        image_model: str | None = None,
    ) -> None:
        if callable(kind):
            self._callable: Callable[[str], int] | None = kind
            self._name = getattr(kind, "__name__", "callable")
        elif isinstance(kind, str) and kind in BUILTIN:
            self._callable = None
            self._name = kind
        else:
            raise ConfigError(
                f"tokenizer: unknown tokenizer {kind!r}; expected 'approx', 'o200k_base', 'cl100k_base' or a callable",
                "tokenizer",
            )
        for field, value in (("message_overhead_tokens", message_overhead_tokens), ("image_tokens", image_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**12:
                raise ConfigError(f"{field}: expected an int in [0, 10**12], got {value!r}", field)
        self.message_overhead_tokens = message_overhead_tokens
        self.image_tokens = image_tokens
        if image_model is not None and not isinstance(image_model, str):
            raise ConfigError(f"image_model: expected a model name or None, got {image_model!r}", "image_model")
        if image_model is not None:
            _core.image_tokens(1, 1, model=image_model)  # ConfigError for a model no document covers
        self.image_model = image_model

    @property
    def name(self) -> str:
        """``"approx"``, the encoding name, or the callable's ``__name__``."""
        return self._name

    @property
    def is_builtin(self) -> bool:
        """Whether counting runs entirely in the Rust core."""
        return self._callable is None

    def count(self, text: str) -> int:
        """Tokens of one text."""
        if self._callable is not None:
            return self._call(text)
        if self._name == "approx":
            return _core.estimate_tokens(text)
        return _core.count_tokens(text, self._name)

    def _call(self, text: str) -> int:
        assert self._callable is not None
        n = self._callable(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"tokenizer: the callable returned {n!r}, expected an int >= 0", "tokenizer")
        return n

    def count_each(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        state: _core.ConversationState | None = None,
    ) -> _core.MessageCounts:
        """Tokens of each message, of the system prompt and of the tool definitions.

        With a :class:`ConversationState`, messages counted before (same content) come from its
        cache, and ``calibrated_total`` applies the ratio it learned from provider usage.
        """
        return _core.measure(
            messages,
            format=format,
            system=system,
            tools=tools,
            tokenizer=self._callable if self._callable is not None else self._name,
            message_overhead_tokens=self.message_overhead_tokens,
            image_tokens=self.image_tokens,
            image_model=self.image_model,
            state=state,
        )

    def count_messages(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
    ) -> int:
        """Tokens of a whole request: messages (with per-message overhead, tool-call names and
        arguments, images by their provider's formula or at ``image_tokens``), the separate
        system prompt and the tool definitions."""
        return self.count_each(messages, system=system, tools=tools, format=format).total

    def __repr__(self) -> str:
        return f"TokenCounter({self._name!r})"
