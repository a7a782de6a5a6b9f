"""Chat Completions conversations converted to OpenAI Responses items (for the tests and the sweep).

The conversion is the one an application moving to the Responses API would write: each system,
developer and user message becomes a ``message`` item with ``input_text`` / ``input_image`` parts;
an assistant message becomes an assistant ``message`` item (``output_text`` parts, with the
``id`` and ``status`` of an output item) and one ``function_call`` item per tool call; a tool
message becomes a ``function_call_output``. Before every second assistant turn that makes calls,
one or two ``reasoning`` items with opaque ``encrypted_content`` are synthesized (deterministic
from the position), so that the rule "reasoning stays with the item that follows it" is
exercised on every conversation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _input_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for p in content or []:
        if p.get("type") == "text":
            parts.append({"type": "input_text", "text": p["text"]})
        elif p.get("type") == "image_url":
            url = p["image_url"]["url"] if isinstance(p["image_url"], dict) else p["image_url"]
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return parts or [{"type": "input_text", "text": ""}]


def encrypted(seed: str, n: int = 600) -> str:
    """Opaque base64-looking content, deterministic from ``seed``."""
    out = "gAAAAA"
    h = seed.encode()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h.hex()
    return out[:n]


def to_responses(messages: Sequence[dict[str, Any]], *, reasoning: bool = True) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    turn = 0
    for i, m in enumerate(messages):
        role = m["role"]
        content = m.get("content")
        if role in ("system", "developer", "user"):
            items.append({"type": "message", "role": role, "content": _input_parts(content)})
        elif role == "assistant":
            calls = m.get("tool_calls") or []
            if reasoning and calls:
                turn += 1
                if turn % 2 == 0:
                    for k in range(1 + (turn // 2) % 2):
                        items.append(
                            {
                                "type": "reasoning",
                                "id": f"rs_{i:05d}_{k}",
                                "summary": [],
                                "encrypted_content": encrypted(f"{i}/{k}"),
                            }
                        )
            text = _text_of(content)
            if text or not calls:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": f"msg_{i:05d}",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                )
            for call in calls:
                items.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{call['id']}"[:64],
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }
                )
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": _text_of(content)})
    return items
