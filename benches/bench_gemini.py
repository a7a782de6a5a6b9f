"""What Gemini ``contents`` cost against plain OpenAI dicts, on the same conversation.

    python benches/bench_gemini.py [--size 10000] [--repeat 7]

The OpenAI request is ``_data.conversation(size)`` (the corpus, repeated, valid); the Gemini one is
the same run converted as a Gemini client records it (``tests/_gemini.py``: consecutive messages of
one role merged, tool results as ``function_response`` parts, a ``thought_signature`` on each call
turn), parsed anew from its JSON text as ``_data`` builds the OpenAI side (so both have their
objects laid out as received), as dicts and as ``google.genai.types.Content``. Measured in this run, best of N samples,
each side taking turns, garbage collection off while timing:

* cold ``check()`` (a new list, no state): target <= 1.5x the OpenAI dicts;
* warm ``check(state=...)`` after one append: target <= 2x the OpenAI dicts.

Prints the ratios and exits 1 when a dicts target is missed (``types.Content`` is shown for
information: reading pydantic attributes costs more than dict lookups).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import _data
import _gemini
from context_compactor import ContextCompactor, ConversationState, validate_messages


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    """One sample, garbage collection off."""
    gc.disable()
    try:
        t = time.perf_counter()
        fn(*args, **kwargs)
        return time.perf_counter() - t
    finally:
        gc.enable()


def gemini_new(i: int, typed: bool) -> Any:
    m = _data.new_message(i)
    c = {"role": "model", "parts": [{"text": m["content"]}]}
    if typed:
        from google.genai import types

        return types.Content.model_validate(c)
    return c


def openai_new(i: int, typed: bool) -> Any:
    return _data.new_message(i)


def run(size: int, repeat: int) -> dict[str, tuple[float, float]]:
    compactor = ContextCompactor(max_context_tokens=10_000_000)
    openai = _data.conversation(size)
    converted, system = _gemini.to_gemini(openai, "openai")
    # Parsed anew, as `_data` builds the OpenAI side: each message's objects allocated together, no
    # string shared with the OpenAI copy (the signatures as the REST API's base64 strings).
    contents = json.loads(json.dumps(converted, default=lambda b: base64.b64encode(b).decode()))
    variants: dict[str, tuple[list[Any], Any, Callable[[int, bool], Any], bool]] = {
        "openai dicts": (openai, None, openai_new, False),
        "gemini dicts": (contents, system, gemini_new, False),
    }
    with contextlib.suppress(ImportError):
        variants["gemini types.Content"] = (_gemini.as_types(contents), system, gemini_new, True)
    for name, (msgs, sys_, _, _) in variants.items():
        assert validate_messages(msgs, system=sys_) == [], name
    out: dict[str, tuple[float, float]] = {}
    states = {name: ConversationState() for name in variants}
    for name, (msgs, sys_, _, _) in variants.items():
        compactor.check(msgs, system=sys_, state=states[name])
    cold: dict[str, list[float]] = {name: [] for name in variants}
    warm: dict[str, list[float]] = {name: [] for name in variants}
    serial = 10_000_000
    for _ in range(repeat):
        for name, (msgs, sys_, new, typed) in variants.items():
            fresh = copy.copy(msgs)  # a new list, the same messages: cold means no state
            cold[name].append(timed(compactor.check, fresh, system=sys_))
            serial += 1
            appended = [*msgs, new(serial, typed)]
            warm[name].append(timed(compactor.check, appended, system=sys_, state=states[name]))
    for name in variants:
        out[name] = (min(cold[name]), min(warm[name]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=10_000, help="messages of the OpenAI conversation")
    p.add_argument("--repeat", type=int, default=25, help="samples (best of); the machine may be shared")
    args = p.parse_args(argv)
    res = run(args.size, args.repeat)
    base_cold, base_warm = res["openai dicts"]
    print(f"check() on a {args.size}-message conversation (best of {args.repeat})")
    print(f"{'':24} {'cold':>10} {'ratio':>7} {'warm (1 append)':>16} {'ratio':>7}")
    ok = True
    for name, (cold, warm) in res.items():
        rc, rw = cold / base_cold, warm / base_warm
        print(f"{name:24} {cold * 1e3:>8.2f}ms {rc:>6.2f}x {warm * 1e3:>14.3f}ms {rw:>6.2f}x")
        if name == "gemini dicts":
            ok = rc <= 1.5 and rw <= 2.0
    print("targets (gemini dicts): cold <= 1.5x, warm <= 2x:", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
