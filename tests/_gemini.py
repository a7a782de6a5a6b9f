"""Gemini in tests: the corpus converted into Gemini ``contents`` (dicts or ``google.genai.types``),
and the oracle's Gemini checks (independent of the library: read straight from the wire shape; the
facts of a content are ``context_compactor.eval.facts``'s, which reads Gemini too).

Conversion (as a Gemini client would have recorded the same run): the first system message
becomes ``system_instruction``, a later one a user text; assistant messages become ``model``
contents (text, ``thought`` parts from Anthropic thinking, ``function_call`` parts with the
arguments parsed); tool results become ``function_response`` parts (``{"output": text}``);
consecutive contents of one role are merged, as Gemini wants a function-call turn right after a
user turn. Every model content that makes calls carries a ``thought_signature`` on its first call
(as Gemini 3 sends them), one with thinking but no call on its first part. ``ids=False`` drops
every call/response id (the Gemini Developer API omits them): pairing is then by order and name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from _messages import get, role
from context_compactor.eval.facts import gemini_parts as parts
from context_compactor.eval.facts import is_gemini as is_gemini
from context_compactor.eval.facts import part_field as pget

# -- conversion ------------------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for b in content:
        t = get(b, "text")
        if isinstance(t, str):
            texts.append(t)
        elif get(b, "type") in ("image", "image_url", "input_image"):
            texts.append("[image]")
    return "\n".join(texts)


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {"input": arguments}
    return parsed if isinstance(parsed, dict) else {"input": parsed}


def _signature(*seed: Any) -> bytes:
    return hashlib.sha256(repr(seed).encode()).digest()


def _call(cid: Any, name: str, args: dict[str, Any], ids: bool) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name or "tool", "args": args}
    if ids and cid:
        fc["id"] = cid
    return {"function_call": fc}


def _response(cid: Any, name: str, text: str, ids: bool) -> dict[str, Any]:
    fr: dict[str, Any] = {"name": name or "tool", "response": {"output": text}}
    if ids and cid:
        fr["id"] = cid
    return {"function_response": fr}


def to_gemini(messages: Sequence[Any], fmt: str, system: Any = None, *, ids: bool = True) -> tuple[list[Any], str]:
    """``(contents, system_instruction)`` of an OpenAI or Anthropic corpus conversation."""
    contents: list[dict[str, Any]] = []
    sys_texts = [_text_of(system)] if system else []
    names: dict[str, str] = {}

    def push(r: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == r:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": r, "parts": parts})

    for i, m in enumerate(messages):
        r = role(m)
        content = get(m, "content")
        if r in ("system", "developer"):
            if not contents:
                sys_texts.append(_text_of(content))
            else:
                push("user", [{"text": f"[{r}] {_text_of(content)}"}])
            continue
        if r == "tool":
            cid = get(m, "tool_call_id")
            push("user", [_response(cid, names.get(cid, "tool"), _text_of(content), ids)])
            continue
        parts: list[dict[str, Any]] = []
        if r == "assistant":
            thinking = False
            if isinstance(content, str) and content:
                parts.append({"text": content})
            for b in content if isinstance(content, list) else ():
                kind = get(b, "type")
                if kind == "thinking":
                    thinking = True
                    parts.append({"text": get(b, "thinking") or "", "thought": True})
                elif kind == "redacted_thinking":
                    thinking = True
                elif kind == "tool_use":
                    names[get(b, "id")] = get(b, "name")
                    parts.append(_call(get(b, "id"), get(b, "name"), _args(get(b, "input")), ids))
                elif isinstance(get(b, "text"), str) and get(b, "text"):
                    parts.append({"text": get(b, "text")})
            for c in get(m, "tool_calls") or ():
                f = get(c, "function") or {}
                names[get(c, "id")] = get(f, "name")
                parts.append(_call(get(c, "id"), get(f, "name"), _args(get(f, "arguments")), ids))
            first_call = next((p for p in parts if "function_call" in p), None)
            if first_call is not None:
                first_call["thought_signature"] = _signature(i, "call")
            elif thinking and parts:
                parts[0]["thought_signature"] = _signature(i, "thought")
            push("model", parts or [{"text": "(no content)"}])
            continue
        # user
        if isinstance(content, list):
            results = [b for b in content if get(b, "type") == "tool_result"]
            for b in results:
                cid = get(b, "tool_use_id")
                text = _text_of(get(b, "content"))
                parts.append(_response(cid, names.get(cid, "tool"), text, ids))
            rest = [b for b in content if get(b, "type") != "tool_result"]
            if rest:
                text = _text_of(rest)
                if text:
                    parts.append({"text": text})
        else:
            parts.append({"text": _text_of(content) or "(empty)"})
        push("user", parts or [{"text": "(empty)"}])
    if contents and contents[0]["role"] != "user":
        contents.insert(0, {"role": "user", "parts": [{"text": "(conversation start)"}]})
    return contents, "\n\n".join(t for t in sys_texts if t)


def tools_of(tools: Any) -> list[dict[str, Any]] | None:
    """OpenAI/Anthropic tool definitions as one Gemini ``Tool`` of function declarations."""
    if not tools:
        return None
    decls = []
    for t in tools:
        f = get(t, "function") or t
        decl = {"name": get(f, "name"), "description": get(f, "description") or ""}
        params = get(f, "parameters") or get(f, "input_schema")
        if params:
            decl["parameters_json_schema"] = params
        decls.append(decl)
    return [{"function_declarations": decls}]


def as_types(contents: Sequence[dict[str, Any]]) -> list[Any]:
    from google.genai import types

    return [types.Content.model_validate(c) for c in contents]


# -- reading contents (dicts or types) -------------------------------------------------------------


def is_user_text(message: Any) -> bool:
    return role(message) in ("user", None) and any(pget(p, "function_response") is None for p in parts(message))


def has_responses(message: Any) -> bool:
    return any(pget(p, "function_response") is not None for p in parts(message))


def starts_with_thinking(message: Any) -> bool:
    ps = parts(message)
    return role(message) == "model" and bool(ps) and bool(pget(ps[0], "thought"))


def problems(messages: Sequence[Any]) -> list[str]:
    """Gemini's own rules, read from the wire shape (ids when given, else order and name)."""
    out: list[str] = []
    if messages and role(messages[0]) not in ("user", None):
        out.append(f"0: first content is {role(messages[0])!r}, not 'user'")
    prev_calls: list[tuple[Any, str]] = []
    for i, m in enumerate(messages):
        r = role(m) or "user"
        ps = parts(m)
        if r not in ("user", "model"):
            out.append(f"{i}: role {r!r}")
        if not ps:
            out.append(f"{i}: empty parts")
        calls = [(pget(fc, "id"), pget(fc, "name")) for p in ps if (fc := pget(p, "function_call")) is not None]
        responses = [(pget(fr, "id"), pget(fr, "name")) for p in ps if (fr := pget(p, "function_response")) is not None]
        if calls and r != "model":
            out.append(f"{i}: function_call in a {r} content")
        if responses and r != "user":
            out.append(f"{i}: function_response in a {r} content")
        if calls and i > 0 and (role(messages[i - 1]) or "user") != "user":
            out.append(f"{i}: function call turn not right after a user turn")
        if any(pget(p, "thought_signature") is not None for p in ps) and r != "model":
            out.append(f"{i}: thought_signature in a {r} content")
        # Responses answer exactly the calls of the content right before.
        open_calls = list(prev_calls)
        for rid, name in responses:
            k = next((k for k, (cid, n) in enumerate(open_calls) if (cid == rid if rid else n == name)), None)
            if k is None:
                out.append(f"{i}: function_response {rid or name!r} without its call in the content before")
            else:
                open_calls.pop(k)
        if open_calls:
            out.append(f"{i}: calls {open_calls} of content {i - 1} get no response here")
        prev_calls = calls if r == "model" else []
    return out


def signature_problems(inp: Sequence[Any], out: Sequence[Any]) -> list[str]:
    """Every output part carrying a ``thought_signature`` is an input part unchanged (the same
    object, or equal with the same signature bytes), and each signed input part of a content the
    output keeps (the same object) is unchanged; a model content of the output whose calls are an
    input content's calls keeps that content's signature on them."""
    signed_in: dict[bytes | str, Any] = {}
    for m in inp:
        for p in parts(m):
            sig = pget(p, "thought_signature")
            if sig is not None:
                signed_in[sig] = _plain(p)
    found: list[str] = []
    for i, m in enumerate(out):
        for k, p in enumerate(parts(m)):
            sig = pget(p, "thought_signature")
            if sig is None:
                continue
            if sig not in signed_in:
                found.append(f"{i}: parts[{k}] has a thought_signature no input part had")
            elif _plain(p) != signed_in[sig]:
                found.append(f"{i}: parts[{k}] was altered but kept its thought_signature")
        # A call that kept its place (same name/args) must not lose its signature.
    # The signatures each call (by its exact name, args and id) had in the input (None: unsigned).
    sigs_by_call: dict[str, set[Any]] = {}
    for m in inp:
        for p in parts(m):
            fc = pget(p, "function_call")
            if fc is not None:
                key = json.dumps(_plain(fc), sort_keys=True, default=str)
                sigs_by_call.setdefault(key, set()).add(pget(p, "thought_signature"))
    for i, m in enumerate(out):
        for k, p in enumerate(parts(m)):
            fc = pget(p, "function_call")
            if fc is None:
                continue
            key = json.dumps(_plain(fc), sort_keys=True, default=str)
            if key in sigs_by_call and pget(p, "thought_signature") not in sigs_by_call[key]:
                found.append(f"{i}: parts[{k}] is a signed input call that lost its thought_signature")
    return found


def _plain(v: Any) -> Any:
    if hasattr(v, "model_dump"):
        v = v.model_dump(exclude_none=True)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def orphan_count(out: Sequence[Any]) -> int:
    """Orphaned calls or responses in ``out`` (a trailing call may still wait)."""
    return sum(1 for p in problems(out) if "without its call" in p or "get no response" in p)


def validity_problems(inp: Sequence[Any], out: Sequence[Any]) -> list[str]:
    return problems(out) + signature_problems(inp, out)
