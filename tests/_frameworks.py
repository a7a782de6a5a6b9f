"""The sweep (``tests/sweep.py``) on a framework's own message objects.

Each corpus conversation is converted into the framework's types (LangChain ``BaseMessage``s, or
pydantic-ai ``ModelMessage``s), and every compaction of the sweep runs on those objects. The
oracle (``tests/_oracle.py``) reads plain dicts, so each framework object is shown to it as one
dict (a bridge remembers which: a kept object is the very same dict again, so the oracle's
``is`` checks and record indexes hold), while counting and validation run on the framework
objects themselves (the counts the library promises are the framework objects' counts). Each
output must also go through the framework's own conversion (LangChain's
``convert_to_openai_messages``; pydantic-ai's ``ModelMessagesTypeAdapter`` round trip).

Run ``python tests/_frameworks.py [--full] [--only NAME]`` for the tables; ``tests/
test_framework_sweep.py`` asserts on the CI subset.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sweep
from context_compactor import ContextCompactor, TokenCounter, validate_messages


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text")


# -- LangChain ---------------------------------------------------------------------------------------


def to_langchain(case: sweep.Case) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    if case.system:
        out.append(SystemMessage(_text_of(case.system)))
    for m in case.messages:
        role, content = m["role"], m.get("content")
        if case.fmt == "anthropic" and isinstance(content, list):
            if role == "user":
                for b in content:
                    if b.get("type") == "tool_result":
                        out.append(
                            ToolMessage(
                                _text_of(b.get("content")),
                                tool_call_id=b["tool_use_id"],
                                status="error" if b.get("is_error") else "success",
                            )
                        )
                texts = [b for b in content if b.get("type") != "tool_result"]
                if texts:
                    out.append(HumanMessage(texts))
            else:
                calls = [
                    {"name": b["name"], "args": b["input"], "id": b["id"]}
                    for b in content
                    if b.get("type") == "tool_use"
                ]
                # As ChatAnthropic returns them: the blocks in content, the calls in tool_calls.
                out.append(AIMessage(content=content, tool_calls=calls))
            continue
        if role in ("system", "developer"):
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "assistant":
            calls = [
                {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"]), "id": c["id"]}
                for c in m.get("tool_calls") or ()
            ]
            out.append(AIMessage(content=content or "", tool_calls=calls))
        elif role == "tool":
            out.append(ToolMessage(content, tool_call_id=m["tool_call_id"]))
        else:
            raise ValueError(role)
    return out


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def langchain_dict(m: Any) -> dict[str, Any]:
    """A LangChain message as the Chat Completions message ``ChatOpenAI`` would send."""
    ty = m.type
    if ty == "system":
        return {"role": "system", "content": m.content}
    if ty == "human":
        return {"role": "user", "content": m.content}
    if ty == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    content = m.content
    if isinstance(content, list):
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
    d: dict[str, Any] = {"role": "assistant", "content": content or None}
    if m.tool_calls:
        d["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": _compact_json(c["args"])},
            }
            for c in m.tool_calls
        ]
    elif d["content"] is None:
        d["content"] = ""
    return d


def langchain_roundtrip(messages: Sequence[Any]) -> None:
    from langchain_core.messages import BaseMessage, convert_to_openai_messages

    assert all(isinstance(m, BaseMessage) for m in messages)
    assert len(convert_to_openai_messages(list(messages))) == len(messages)


# -- pydantic-ai -------------------------------------------------------------------------------------


def to_pydantic_ai(case: sweep.Case) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    pending: list[Any] = []  # parts of the request being built

    def flush() -> None:
        nonlocal pending
        if pending:
            out.append(ModelRequest(parts=pending))
            pending = []

    if case.system:
        pending.append(SystemPromptPart(_text_of(case.system)))
    names: dict[str, str] = {}
    for m in case.messages:
        role, content = m["role"], m.get("content")
        if role in ("system", "developer"):
            if pending and not all(p.part_kind == "system-prompt" for p in pending):
                flush()
            pending.append(SystemPromptPart(_text_of(content)))
        elif role == "user":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            results = [b for b in blocks if b.get("type") == "tool_result"]
            texts = [b for b in blocks if b.get("type") != "tool_result"]
            if pending and any(p.part_kind != "system-prompt" for p in pending):
                flush()
            for b in results:
                rid = b["tool_use_id"]
                pending.append(ToolReturnPart(names.get(rid, "tool"), _text_of(b.get("content")), tool_call_id=rid))
            if texts:
                pending.append(UserPromptPart(_text_of(texts)))
            flush()
        elif role == "tool":
            if pending and any(p.part_kind != "tool-return" for p in pending):
                flush()
            rid = m["tool_call_id"]
            pending.append(ToolReturnPart(names.get(rid, "tool"), _text_of(content), tool_call_id=rid))
        else:
            flush()
            parts: list[Any] = []
            if isinstance(content, list):
                for b in content:
                    t = b.get("type")
                    if t == "thinking":
                        parts.append(ThinkingPart(b.get("thinking", ""), signature=b.get("signature")))
                    elif t == "text":
                        parts.append(TextPart(b["text"]))
                    elif t == "tool_use":
                        names[b["id"]] = b["name"]
                        parts.append(ToolCallPart(b["name"], b["input"], tool_call_id=b["id"]))
            elif content:
                parts.append(TextPart(content))
            for c in m.get("tool_calls") or ():
                names[c["id"]] = c["function"]["name"]
                args = json.loads(c["function"]["arguments"])  # as pydantic-ai's Anthropic model gives them
                parts.append(ToolCallPart(c["function"]["name"], args, tool_call_id=c["id"]))
            if not parts:
                parts.append(TextPart(content if isinstance(content, str) else ""))
            out.append(ModelResponse(parts=parts))
    flush()
    return out


def _is_task_request(m: Any) -> bool:
    kinds = {p.part_kind for p in m.parts}
    return m.kind == "request" and "user-prompt" in kinds and "system-prompt" in kinds


def pydantic_ai_system(objs: Sequence[Any]) -> str | None:
    """The system prompt of a history (the system prompt parts of its task request), which the
    oracle reads as the request's system prompt, as pydantic-ai's Anthropic model sends it."""
    for m in objs:
        if _is_task_request(m):
            return "\n\n".join(p.content for p in m.parts if p.part_kind == "system-prompt")
    return None


def pydantic_ai_dict(m: Any) -> dict[str, Any]:
    """A pydantic-ai message as the Anthropic Messages message its Anthropic model would send
    (the task request's system prompt parts go to ``system``: :func:`pydantic_ai_system`)."""
    blocks: list[dict[str, Any]] = []
    task = _is_task_request(m)
    for p in m.parts:
        k = p.part_kind
        if k == "system-prompt" and task:
            continue
        if k == "tool-return":
            blocks.append({"type": "tool_result", "tool_use_id": p.tool_call_id, "content": p.model_response_str()})
        elif k == "tool-call":
            blocks.append({"type": "tool_use", "id": p.tool_call_id, "name": p.tool_name, "input": p.args_as_dict()})
        elif k == "thinking":
            blocks.append({"type": "thinking", "thinking": p.content, "signature": p.signature or ""})
        elif isinstance(getattr(p, "content", None), str):
            blocks.append({"type": "text", "text": p.content})
    return {"role": "user" if m.kind == "request" else "assistant", "content": blocks}


def pydantic_ai_roundtrip(messages: Sequence[Any]) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    back = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(list(messages)))
    assert len(back) == len(messages)


def pydantic_ai_pinned(messages: Sequence[Any]) -> list[int]:
    from context_compactor.integrations.pydantic_ai import pinned_indexes

    return pinned_indexes(messages)


# -- the bridge between framework objects and the oracle's dicts ----------------------------------------


@dataclass(frozen=True)
class Frame:
    name: str
    #: The format of the dicts the oracle reads.
    fmt: str
    build: Callable[[sweep.Case], list[Any]]
    as_dict: Callable[[Any], dict[str, Any]]
    roundtrip: Callable[[Sequence[Any]], None]
    pinned: Callable[[Sequence[Any]], list[int]] | None = None
    summary_roles: tuple[str, ...] = ("user", "system")
    #: The system prompt the oracle reads, when it lives inside the framework's messages (it is
    #: then never passed to the library separately).
    system: Callable[[Sequence[Any]], str | None] | None = None


FRAMES = {
    "langchain": Frame("langchain", "openai", to_langchain, langchain_dict, langchain_roundtrip),
    "pydantic_ai": Frame(
        "pydantic_ai",
        "anthropic",
        to_pydantic_ai,
        pydantic_ai_dict,
        pydantic_ai_roundtrip,
        pinned=pydantic_ai_pinned,
        system=pydantic_ai_system,
        summary_roles=("user",),  # the history processor refuses "system": no system prompt to hold it
    ),
}


class Bridge:
    """Framework objects <-> the dicts the oracle reads, one dict per object, for good (it holds
    both, so ids are never reused)."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.fw_of: dict[int, Any] = {}
        self.dict_of: dict[int, dict[str, Any]] = {}
        self._hold: list[Any] = []

    def dicts(self, objs: Sequence[Any]) -> list[Any]:
        out = []
        for o in objs:
            d = self.dict_of.get(id(o))
            if d is None:
                d = self.frame.as_dict(o)
                self.dict_of[id(o)] = d
                self.fw_of[id(d)] = o
                self._hold += [o, d]
            out.append(d)
        return out

    def objects(self, dicts: Sequence[Any]) -> list[Any]:
        return [self.fw_of.get(id(d), d) for d in dicts]


class _Result:
    """A compaction result whose messages are the oracle's dicts."""

    def __init__(self, real: Any, messages: list[Any]) -> None:
        self._real = real
        self.messages = messages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class Compactor:
    """The sweep's compactor: runs the real one on the framework objects."""

    def __init__(self, real: ContextCompactor, bridge: Bridge) -> None:
        self.real, self.bridge, self.config = real, bridge, real.config

    def _system(self, system: Any) -> Any:
        return None if self.bridge.frame.system else system

    def check(self, messages: Sequence[Any], *, system: Any = None, tools: Any = None, format: Any = None) -> Any:
        return self.real.check(self.bridge.objects(messages), system=self._system(system), tools=tools)

    def compact(
        self, messages: Sequence[Any], *, system: Any = None, tools: Any = None, format: Any = None, force: bool = False
    ) -> Any:
        objs = self.bridge.objects(messages)
        pinned = self.bridge.frame.pinned(objs) if self.bridge.frame.pinned else None
        result = self.real.compact(objs, system=self._system(system), tools=tools, force=force, pinned=pinned)
        self.bridge.frame.roundtrip(result.messages)
        return _Result(result, self.bridge.dicts(result.messages))


class Counter:
    """The sweep's counter: counts the framework objects behind the oracle's dicts."""

    def __init__(self, real: TokenCounter, bridge: Bridge) -> None:
        self.real, self.bridge = real, bridge

    def count_messages(self, messages: Sequence[Any], **kw: Any) -> int:
        if self.bridge.frame.system:
            kw.pop("system", None)  # inside the messages
        return self.real.count_messages(self.bridge.objects(messages), **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def framework_cases(frame: Frame, cases: Sequence[sweep.Case]) -> list[tuple[sweep.Case, Bridge]]:
    out = []
    for c in cases:
        bridge = Bridge(frame)
        objs = frame.build(c)
        system = frame.system(objs) if frame.system else None
        case = sweep.Case(c.name, frame.fmt, bridge.dicts(objs), system, c.tools)
        out.append((case, bridge))
    return out


def run(frame: Frame, cases: Sequence[sweep.Case], grid: sweep.Grid) -> tuple[sweep.Tally, sweep.Tally]:
    """The sweep on the framework objects, and on the same conversations as plain dicts (the
    baseline their must-keep facts are held to)."""
    converted = framework_cases(frame, cases)
    bridges = {c.name: b for c, b in converted}
    grid = replace(grid, roles=tuple(r for r in grid.roles if r in frame.summary_roles))

    def adapt(ctx: sweep.Context) -> sweep.Context:
        bridge = bridges[ctx.case.name]

        def validate(messages: Sequence[Any], **kw: Any) -> Any:
            kw.pop("format", None)
            if bridge.frame.system:
                kw.pop("system", None)  # inside the messages
            return validate_messages(bridge.objects(messages), **kw)

        return replace(
            ctx,
            compactor=Compactor(ctx.compactor, bridge),  # type: ignore[arg-type]
            counter=Counter(ctx.counter, bridge),  # type: ignore[arg-type]
            validate=validate,
        )

    plain = [c for c, _ in converted]
    return sweep.sweep(plain, grid, adapt), sweep.sweep(plain, grid)


def recall_gap(framework: sweep.Tally, baseline: sweep.Tally, grid: sweep.Grid) -> dict[str, float]:
    """Fact recall (percentage points) of the framework run minus the dict run, per window and
    summarizer."""
    gaps = {}
    for share in grid.shares:
        for s in grid.summarizers:
            fk, ft = framework.recall(share, s)
            bk, bt = baseline.recall(share, s)
            if ft and bt:
                gaps[f"{share:g}/{s}"] = 100 * (fk / ft - bk / bt)
    return gaps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--only", help="corpus files whose name contains this")
    parser.add_argument("--frame", choices=sorted(FRAMES), action="append")
    args = parser.parse_args(argv)
    grid = sweep.FULL if args.full else sweep.CI
    cases = [c for c in sweep.load_cases() if not args.only or args.only in c.name]
    bad = 0
    for name in args.frame or sorted(FRAMES):
        fw, base = run(FRAMES[name], cases, grid)
        print(f"== {name}: {len(cases)} conversations")
        print(sweep.report(fw, grid))
        print(f"recall gap vs plain dicts (points): {recall_gap(fw, base, grid)}")
        bad += sum(fw.counts.get(k, 0) for k in sweep.KINDS)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
