"""Reading messages of any kind in tests: dicts, lists and the SDKs' pydantic objects alike."""

from __future__ import annotations

from typing import Any


def get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def role(m: Any) -> Any:
    return get(m, "role")


def strings(value: Any) -> list[str]:
    """Every string inside a value (dicts, lists, SDK objects)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in strings(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in strings(v)]
    if hasattr(value, "model_dump"):
        return strings(value.model_dump())
    return []


def snapshot(value: Any) -> Any:
    """A deep, plain copy to compare before/after (SDK objects through ``model_dump``)."""
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [snapshot(v) for v in value]
    if hasattr(value, "model_dump"):
        return ("sdk", type(value).__name__, snapshot(value.model_dump()))
    return value
