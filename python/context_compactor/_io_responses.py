"""The OpenAI Responses request as a file: ``{"input": [...items], "instructions": ..., "tools": [...]}``
(the body of ``client.responses.create``), read and written by :mod:`context_compactor.io`.

- ``input`` is the item list (``message``, ``function_call``, ``function_call_output``,
  ``reasoning``, ...). A string ``input`` (the API takes one) is one user message item.
- ``instructions`` is the system prompt (``Transcript.system``): a string or ``null``.
- ``tools`` is the tool list. Other request fields (``model``, ``reasoning``, ``store``, ...) are
  not part of the conversation and are not read.

Items are kept as the file has them (a ``reasoning`` item's ``encrypted_content`` byte for byte);
the compactor checks the items themselves, this module only the request's shape.
"""

from __future__ import annotations

from typing import Any

from context_compactor._io_fields import FieldError, check_list, check_object, check_optional_list, kind, request

__all__ = ["TITLE", "is_request", "read", "write"]

#: The format's name in messages (``"a Responses request ..."``).
TITLE = "Responses"


def is_request(data: Any) -> bool:
    """A Responses request: an object with ``input`` (and not another format's ``messages``/``contents``)."""
    return isinstance(data, dict) and "input" in data and "messages" not in data and "contents" not in data


def read(data: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None, list[Any] | None]:
    """``(items, instructions, tools)`` of a request; :class:`FieldError` names a malformed field."""
    raw = data["input"]
    if isinstance(raw, str):
        items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": raw}]
    else:
        items = check_list(raw, "input", "Responses items")
        for i, item in enumerate(items):
            check_object(item, f"input[{i}]", "a Responses item")
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise FieldError(f'"instructions" must be a string or null, not {kind(instructions)}', "instructions")
    return items, instructions, check_optional_list(data.get("tools"), "tools", "tool definitions")


def write(items: list[Any], instructions: Any, tools: list[Any] | None) -> dict[str, Any]:
    """The request object (``instructions`` and ``tools`` only when given)."""
    return request("input", items, "instructions", instructions, tools)
