"""Exceptions raised by context-compactor.

Every exception derives from :class:`CompactorError` and also from the built-in class that fits
(``TypeError`` for wrong Python types, ``ValueError`` for bad values), so existing ``except``
clauses keep working. They carry attributes, not only text.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CompactorError",
    "ConfigError",
    "FormatMismatchError",
    "InvalidConversationError",
    "MessageTypeError",
    "StoreError",
    "SummarizerError",
]


class CompactorError(Exception):
    """Base class of every error raised by context-compactor."""


class MessageTypeError(CompactorError, TypeError):
    """A message, or a field of one, has a Python type the formats do not allow.

    Attributes:
        index: Index of the message in the list (``None`` for the list itself, ``system``, ``tools``
            or another argument).
        field: Path of the offending field inside the message, e.g. ``"content[2].text"``.

    Example:
        >>> from context_compactor import validate_messages, MessageTypeError
        >>> try:
        ...     validate_messages([{"role": "user", "content": 42}])
        ... except MessageTypeError as e:
        ...     print(e.index, e.field)
        0 content
    """

    def __init__(self, message: str, index: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.field = field


class InvalidConversationError(CompactorError, ValueError):
    """The conversation is not valid for the provider and repair was turned off.

    Attributes:
        problems: The :class:`~context_compactor.Problem` list ``validate_messages`` reports.
    """

    def __init__(self, message: str, problems: list[Any] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class ConfigError(CompactorError, ValueError):
    """A configuration value is invalid.

    Attributes:
        field: The configuration field at fault.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class FormatMismatchError(ConfigError):
    """A forced ``format=`` does not fit the messages: its reader would drop their content
    (Gemini reads ``parts``, the others ``content``). Raised by a compaction (``plan``,
    ``compact``, ``acompact``, ``compact_many``); ``validate_messages`` reports such input as
    problems instead. A role the forced format does not have is not a mismatch: the repair
    rewrites it and lists that in ``repairs``.

    Attributes:
        field: ``"format"``.
        format: The forced format.
        detected: The format the messages are detected as.

    Example:
        >>> from context_compactor import ContextCompactor, FormatMismatchError
        >>> msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        >>> try:
        ...     ContextCompactor(max_context_tokens=1000).compact(msgs, format="gemini", force=True)
        ... except FormatMismatchError as e:
        ...     print(e.format, e.detected)
        gemini openai
    """

    def __init__(self, message: str, format: str | None = None, detected: str | None = None) -> None:
        super().__init__(message, "format")
        self.format = format
        self.detected = detected

    def __reduce__(self) -> tuple[Any, ...]:  # picklable with its attributes (batch workers send it)
        return (type(self), (str(self), self.format, self.detected))


class SummarizerError(CompactorError):
    """The summarizer failed in a way the fallback ladder does not cover (the cause is chained)."""


class StoreError(CompactorError):
    """The session store could not be read or written."""
