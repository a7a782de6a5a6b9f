"""Shape checks shared by the request readers of :mod:`context_compactor.io` (``_io_responses``,
``_io_gemini``): each fault names the field it is in (``input[3]``, ``contents[2].parts[0]``).

The readers raise :class:`FieldError`; :mod:`context_compactor.io` turns it into a
:class:`~context_compactor.io.TranscriptError` carrying the same ``field`` (this module imports
nothing from ``io``, so there is no import circle).
"""

from __future__ import annotations

from typing import Any

__all__ = ["FieldError", "check_list", "check_object", "check_optional_list", "kind", "request"]


class FieldError(ValueError):
    """A request field has the wrong shape. ``field`` is its path, e.g. ``"input[3]"``."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def kind(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def check_list(value: Any, field: str, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise FieldError(f'"{field}" must be a list of {what}, not {kind(value)}', field)
    return value


def check_optional_list(value: Any, field: str, what: str) -> list[Any] | None:
    return None if value is None else check_list(value, field, what)


def check_object(value: Any, field: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FieldError(f"{field} must be {what} (a JSON object), not {kind(value)}", field)
    return value


def request(key: str, messages: list[Any], system_key: str, system: Any, tools: list[Any] | None) -> dict[str, Any]:
    """A request object: the conversation under ``key``, the system prompt and the tools only when given."""
    data: dict[str, Any] = {key: messages}
    if system is not None:
        data[system_key] = system
    if tools is not None:
        data["tools"] = tools
    return data
