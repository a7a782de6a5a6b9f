"""Messages in tests: reading any kind (dicts, lists and the SDKs' pydantic objects alike), and
the agent run several test files compact (:func:`conversation`)."""

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


def conversation(turns: int = 30) -> list[dict[str, Any]]:
    """An OpenAI-format agent run: a system prompt, the task, ``turns`` bash calls with their
    output, and a final answer (30 turns go well past a 12k-token window)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    msgs.append({"role": "user", "content": "Fix the failing test in /srv/app/billing/tax.py please."})
    for i in range(turns):
        cid = f"call_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: " + "I considered the failing assertion and the rounding rules once more. " * 20,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"cmd": "cat f{i}.py"}}'},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"line {i}\n" * 200})
    msgs.append({"role": "assistant", "content": "Done: the ZeroDivisionError is fixed."})
    return msgs
