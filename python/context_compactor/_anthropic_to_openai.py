"""An Anthropic request converted to OpenAI Chat Completions messages (``io.load(...,
format="openai")`` of an Anthropic file or a Claude Code log). Split out of ``io.py``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["to_openai"]


def _text_of(content: Any, sep: str = "\n") -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "text":
            parts.append(str(b.get("text", "")))
        elif isinstance(b, dict) and b.get("type") in ("image", "document"):
            parts.append(f"[{b['type']}]")
        elif isinstance(b, str):
            parts.append(b)
    return sep.join(parts)


def _openai_part(b: Any) -> dict[str, Any]:
    if isinstance(b, dict) and b.get("type") == "text":
        return {"type": "text", "text": b.get("text", "")}
    if isinstance(b, dict) and b.get("type") == "image" and isinstance(b.get("source"), dict):
        src = b["source"]
        if src.get("type") == "base64":
            return {"type": "image_url", "image_url": {"url": f"data:{src.get('media_type')};base64,{src.get('data')}"}}
        if src.get("type") == "url":
            return {"type": "image_url", "image_url": {"url": src.get("url")}}
    return {"type": "text", "text": json.dumps(b, ensure_ascii=False)}


def to_openai(messages: Sequence[dict[str, Any]], system: Any = None) -> list[dict[str, Any]]:
    """Convert an Anthropic request to OpenAI Chat Completions messages.

    The system prompt becomes a leading system message; text blocks are joined; thinking is
    dropped; ``tool_use`` becomes ``tool_calls`` (arguments as JSON text); each ``tool_result``
    becomes a ``tool`` message, placed before the rest of its user message; images become
    ``image_url`` parts (``[image]`` inside tool results, which OpenAI keeps text-only).

    Example:
        >>> to_openai([{"role": "user", "content": "hi"}], system="Be brief.")
        [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": _text_of(system, "\n\n")})
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if isinstance(content, str) or content is None:
            out.append({"role": role, "content": content if content is not None else ""})
            continue
        if role == "assistant":
            texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {
                        "name": b.get("name"),
                        "arguments": json.dumps(b.get("input", {}), ensure_ascii=False),
                    },
                }
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            if not texts and not calls:
                continue  # thinking only
            msg: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        rest = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                out.append(
                    {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": _text_of(b.get("content"))}
                )
            else:
                rest.append(b)
        if rest:
            if all(isinstance(b, dict) and b.get("type") == "text" for b in rest):
                out.append({"role": role, "content": _text_of(rest, "\n\n")})
            else:
                out.append({"role": role, "content": [_openai_part(b) for b in rest]})
    return out


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
