"""What reading a framework's own messages costs against plain dicts of the same conversation.

    python benches/bench_adapters.py [--messages 1000,10000] [--repeat N] [--tokenizer approx]

The conversation: `_data.conversation(n)` (the shared corpus, repeated, a valid Chat
Completions request), converted by `tests/_frameworks.py` into LangChain messages and into
pydantic-ai messages. Each framework is compared with plain dicts of the very same conversation
as that framework's provider would send it (LangChain: the Chat Completions dicts; pydantic-ai:
the Anthropic Messages dicts), so the counts are identical (asserted) and only the reading
differs. `gemini`: the same run as Gemini `contents` dicts (`tests/_gemini.py`, parsed anew from
their JSON text as `make bench-gemini` does) against the Chat Completions dicts (another wire
format: the counts differ a little), with `--adapters langchain,pydantic_ai,gemini`.

Best of N samples of process CPU time (all threads; the machine this was written on is shared,
and wall time under load measured the neighbours), the two taking turns (one sample each per
round), garbage collection off while timing.

* cold: `ContextCompactor.check(messages)` without a state. Target <= 1.5x the dicts.
* warm: `check(messages + [one new message], state=state)` on a `ConversationState` that has
  seen `messages` (priming outside the timer). Target <= 2x the dicts.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import _data  # noqa: E402
import _frameworks  # noqa: E402
import _gemini  # noqa: E402
import sweep  # noqa: E402
from context_compactor import ContextCompactor, ConversationState  # noqa: E402


def best(samples: list[float]) -> float:
    return min(samples)


def timed(fn: Callable[[], Any]) -> float:
    gc.disable()
    try:
        t = time.process_time()
        fn()
        return time.process_time() - t
    finally:
        gc.enable()


def pair(name: str, n: int) -> tuple[list[Any], list[Any], Any, Any, Any]:
    """(framework messages, the same as dicts, a new framework message, the same as a dict, the
    dicts' separate system prompt)."""
    if name == "gemini":
        raise ValueError("gemini: see gemini_pair")
    raw = _data.conversation(n + 1)
    case = sweep.Case("bench", "openai", raw, None, None)
    frame = _frameworks.FRAMES[name]
    objs = frame.build(case)
    dicts = [frame.as_dict(m) for m in objs]
    system = frame.system(objs) if frame.system else None
    return objs[:-1], dicts[:-1], objs[-1], dicts[-1], system


def gemini_pair(n: int) -> tuple[list[Any], list[Any], Any, Any, Any]:
    """(Gemini contents, the Chat Completions dicts, a new content, a new dict, the contents'
    system instruction)."""
    openai = _data.conversation(n)
    converted, system = _gemini.to_gemini(openai, "openai")
    contents = json.loads(json.dumps(converted, default=lambda b: base64.b64encode(b).decode()))
    new = _data.new_message(n)
    return contents, openai, {"role": "model", "parts": [{"text": new["content"]}]}, new, system


def run(name: str, n: int, repeat: int, tokenizer: str) -> dict[str, float]:
    compactor = ContextCompactor(tokenizer=tokenizer)
    if name == "gemini":
        objs, dicts, new_obj, new_dict, fw_system = gemini_pair(n)
        system = None
    else:
        objs, dicts, new_obj, new_dict, system = pair(name, n)
        fw_system = None
        # The same counts (pydantic-ai: up to the framing of the system prompt, a separate
        # system prompt for the dicts and parts of the first request for pydantic-ai).
        fw_tokens = compactor.check(objs).current_tokens
        dict_tokens = compactor.check(dicts, system=system).current_tokens
        assert abs(fw_tokens - dict_tokens) <= 8, (fw_tokens, dict_tokens)
    cold: dict[str, list[float]] = {"fw": [], "dict": []}
    warm: dict[str, list[float]] = {"fw": [], "dict": []}
    for _ in range(repeat):
        for key, msgs, new, sys_ in (("fw", objs, new_obj, fw_system), ("dict", dicts, new_dict, system)):
            cold[key].append(timed(lambda msgs=msgs, sys_=sys_: compactor.check(msgs, system=sys_)))
            state = ConversationState()
            compactor.check(msgs, state=state, system=sys_)
            longer = [*msgs, new]
            warm[key].append(
                timed(lambda longer=longer, state=state, sys_=sys_: compactor.check(longer, state=state, system=sys_))
            )
    return {
        "cold_fw_ms": 1e3 * best(cold["fw"]),
        "cold_dict_ms": 1e3 * best(cold["dict"]),
        "warm_fw_ms": 1e3 * best(warm["fw"]),
        "warm_dict_ms": 1e3 * best(warm["dict"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--tokenizer", default="approx")
    parser.add_argument("--adapters", default="langchain,pydantic_ai", help="also: gemini")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    missed = 0
    print(f"tokenizer {args.tokenizer}, best of {args.repeat}")
    print(f"{'adapter':<12} {'messages':>8} {'cold ms':>16} {'ratio':>6} {'warm ms':>16} {'ratio':>6}")
    for name in args.adapters.split(","):
        for n in (int(x) for x in args.messages.split(",")):
            r = run(name, n, args.repeat, args.tokenizer)
            cold = r["cold_fw_ms"] / r["cold_dict_ms"]
            warm = r["warm_fw_ms"] / r["warm_dict_ms"]
            missed += (cold > 1.5) + (warm > 2.0)
            print(
                f"{name:<12} {n:>8} {r['cold_fw_ms']:>7.2f} vs {r['cold_dict_ms']:>6.2f} {cold:>5.2f}x"
                f" {r['warm_fw_ms']:>7.3f} vs {r['warm_dict_ms']:>6.3f} {warm:>5.2f}x"
            )
    print("targets: cold <= 1.5x, warm <= 2x the dicts" + (f"; {missed} missed" if missed else ": met"))
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
