"""How a :class:`~context_compactor.Session` stores messages: JSON text of dicts or SDK objects.

Every failure is the library's typed error naming the message and the field: a value JSON cannot
hold, a cycle, or nesting deeper than the encoder can go (``json`` recurses: a deeply nested
message raised ``RecursionError`` from ``Session.append``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from context_compactor.errors import MessageTypeError

__all__ = ["dumps", "encode", "loads", "usage_json", "usage_tokens"]


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    """Compact JSON text (lone surrogates kept as JSON escapes).

    Raises:
        TypeError: A value JSON cannot hold.
        ValueError: NaN or infinity, a cycle, or nesting too deep to encode.
    """
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_default, allow_nan=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: keep them as JSON escapes
            text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=_default, allow_nan=False)
    except RecursionError as e:
        raise ValueError("nested too deeply to store") from e
    return text


def _field(message: Any) -> str | None:
    """The first top-level field whose value fails to encode (``None`` when none alone does)."""
    if isinstance(message, Mapping):
        for key, value in message.items():
            try:
                dumps(value)
            except (TypeError, ValueError):
                return str(key)
    return None


def encode(message: Any, index: int) -> tuple[dict[str, Any], str]:
    """``(plain dict, JSON text)`` of a message dict or SDK object.

    Raises:
        MessageTypeError: Not a mapping or an SDK message object, no ``role`` str (nor a Responses
            item's ``type``), or not storable
            as JSON (``.index`` is ``index``; ``.field`` the top-level field at fault, when known).
    """
    if type(message).__module__.startswith("langchain_core."):
        # A LangChain message is stored as the Chat Completions message it stands for.
        from context_compactor.integrations.langchain import to_openai

        message = to_openai(message)
    if isinstance(message, Mapping):
        obj: Any = message
    elif callable(getattr(message, "model_dump", None)):
        try:
            obj = message.model_dump(mode="json", exclude_none=True)
        except RecursionError as e:
            raise MessageTypeError(f"message {index} is nested too deeply to store", index) from e
    else:
        raise MessageTypeError(
            f"message {index}: expected a dict or an SDK message object, got {type(message).__name__}", index
        )
    try:
        text = dumps(obj)
        plain = json.loads(text)
    except RecursionError as e:  # decoding what the encoder just managed
        raise MessageTypeError(f"message {index} is nested too deeply to store", index) from e
    except (TypeError, ValueError) as e:
        field = _field(obj)
        where = f" (field {field})" if field else ""
        raise MessageTypeError(f"message {index} cannot be stored as JSON{where}: {e}", index, field) from e
    if not isinstance(plain, dict):
        raise MessageTypeError(f"message {index}: expected a mapping, got {type(plain).__name__}", index)
    # A Responses item other than a message has a `type` and no role.
    if not isinstance(plain.get("role"), str) and not isinstance(plain.get("type"), str):
        raise MessageTypeError(f"message {index}: 'role' must be a str, got {plain.get('role')!r}", index, "role")
    return plain, text


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def usage_tokens(usage: Any) -> int | None:
    """The prompt size a usage report gives (OpenAI ``prompt_tokens``; Anthropic input + cache)."""
    if isinstance(usage, bool):
        return None
    if isinstance(usage, int):
        return usage

    def get(key: str) -> Any:
        return usage.get(key) if isinstance(usage, Mapping) else getattr(usage, key, None)

    value = get("prompt_tokens")
    if isinstance(value, int):
        return value
    parts = [get(k) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    if not isinstance(parts[0], int):
        return None
    return sum(p for p in parts if isinstance(p, int))


def usage_json(usage: Any) -> str | None:
    try:
        return dumps(usage)
    except (TypeError, ValueError):
        return None
