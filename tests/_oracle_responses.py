"""The oracle's rules for OpenAI Responses items (used by ``tests/_oracle.py`` when ``fmt ==
"responses"``), written from the provider's 400 errors (see ``tests/_responses_stub.py``), not
from the library:

- validity: every output answers a call made before it, every call is answered before the user
  speaks again (a trailing call may wait), no ``call_id`` twice, every reasoning item (or run of
  them) followed by an assistant-side item;
- ``reasoning_separated``: a reasoning item of the output is not followed by the item that
  followed it in the input (or is not an input object at all);
- ``opaque_altered``: an opaque item of the output (reasoning, compaction, unknown types) that is
  not the input object itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from _messages import get
from _responses_stub import CALLS

#: Item types whose content the library can edit (their text), all others are opaque.
EDITABLE = CALLS | {"message", "function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def item_type(item: Any) -> str:
    return get(item, "type") or "message"


def is_user(item: Any) -> bool:
    return item_type(item) == "message" and get(item, "role") == "user"


def assistant_side(item: Any) -> bool:
    t = item_type(item)
    if t == "message":
        return get(item, "role") == "assistant"
    return not (t.endswith("_output") or t in ("reasoning", "item_reference", "mcp_approval_response"))


def validity(out: Sequence[Any]) -> list[str]:
    problems = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, it in enumerate(out):
        t = item_type(it)
        if t in CALLS:
            cid = get(it, "call_id")
            if cid in calls:
                problems.append(f"{i}: call_id {cid!r} used twice")
            calls[cid] = i
        elif t.endswith("_output"):
            cid = get(it, "call_id")
            if cid not in calls:
                problems.append(f"{i}: output for {cid!r} without a call before it")
            answered.add(cid)
        elif t == "reasoning":
            j = i + 1
            while j < len(out) and item_type(out[j]) == "reasoning":
                j += 1
            if j == len(out) or not assistant_side(out[j]):
                problems.append(f"{i}: reasoning without its following item")
        if is_user(it):
            for cid, at in calls.items():
                if cid not in answered and at < i:
                    problems.append(f"{i}: call {cid!r} (item {at}) has no output before the user speaks")
                    answered.add(cid)
    return problems


def separated(inp: Sequence[Any], out: Sequence[Any]) -> Iterator[str]:
    pos = {id(m): i for i, m in enumerate(inp)}
    for j, m in enumerate(out):
        if item_type(m) != "reasoning":
            continue
        i = pos.get(id(m))
        if i is None:
            yield f"{j}: a reasoning item that is not an input object"
        elif j + 1 >= len(out) or i + 1 >= len(inp) or out[j + 1] is not inp[i + 1]:
            yield f"{j}: reasoning item (input {i}) not followed by its input item {i + 1}"


def altered(inp: Sequence[Any], out: Sequence[Any]) -> Iterator[str]:
    ids = {id(m) for m in inp}
    for j, m in enumerate(out):
        if item_type(m) not in EDITABLE and id(m) not in ids:
            yield f"{j}: a {item_type(m)} item that is not the input object"


def last_block_start(messages: Sequence[Any]) -> int:
    """The smallest legal tail: back over outputs, the calls they answer and reasoning before them."""
    start = len(messages) - 1
    while start > 0 and (item_type(messages[start]).endswith("_output") or item_type(messages[start]) in CALLS):
        start -= 1
    if item_type(messages[start]) not in CALLS and start + 1 < len(messages):
        start += 1
    while start > 0 and item_type(messages[start - 1]) == "reasoning":
        start -= 1
    return start


def call_argument_texts(message: Any) -> list[str]:
    if item_type(message) in ("function_call", "custom_tool_call"):
        args = get(message, "arguments")
        return [args if isinstance(args, str) else get(message, "input") or ""]
    return []
