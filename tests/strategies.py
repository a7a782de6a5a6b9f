"""Hypothesis strategies shared by the property tests: conversations in both wire formats that
are valid by construction (and broken copies of them for the repair path), and random configs.

A conversation is drawn as an abstract *script* (turns of user text, tool steps with parallel
calls, thinking, images, mid-conversation system messages, a pending trailing call) and then
rendered into OpenAI Chat Completions or Anthropic Messages dicts, with some messages or blocks
as the ``openai`` / ``anthropic`` SDKs' pydantic objects. Rendering numbers every tool-call id
from a prefix, so later segments appended to a compacted conversation never reuse an id.
"""

from __future__ import annotations

import copy
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

# -- text ---------------------------------------------------------------------------------------

ENGLISH = (
    "The user asked to fix the failing test in the billing module.",
    "I looked at the rounding rules and the tax tables once more.",
    "Next, run the whole suite and compare the totals with the fixtures.",
    "The deploy script reads its settings from the environment.",
    "Let me check the logs before changing anything else.",
)
CHINESE = (
    "上下文压缩：保留重要的内容，删除冗余的工具输出。",
    "用户要求修复计费模块中失败的测试。",
    "我检查了日志，发现数据库连接超时。",
    "请把结果写入报告，并列出所有修改过的文件。",
)
EMOJI = (
    "🙂 ok",
    "🚀 deploy done ✅",
    "👩‍💻 pairing on 🐛",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕥𝕖𝕩𝕥",
    "🇯🇵🇫🇷 flags",
    "a\u0301 combining é",
)
CODE = (
    "def total(items):\n    return sum(i.price * i.qty for i in items)\n",
    'fn main() {\n    println!("{}", 1 + 2);\n}\n',
    "SELECT id, amount FROM invoices WHERE paid = 0;",
    'Traceback (most recent call last):\n  File "/srv/app/billing/tax.py", line 42\n'
    "ZeroDivisionError: division by zero",
    "see https://example.com/docs/api?v=2 and /srv/app/config.toml",
    "$ cargo test -q\nerror[E0382]: borrow of moved value: `x`",
    '{"key": [1, 2, 3], "nested": {"a": null}}',
)
FRAGMENTS = ENGLISH + CHINESE + EMOJI + CODE


@st.composite
def texts(draw: st.DrawFn, max_repeat: int = 30) -> str:
    """Prose, Chinese, astral emoji and code, sometimes with arbitrary (non-surrogate) unicode;
    repeated so that sizes range from a line to a few kilobytes."""
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(FRAGMENTS), st.text(min_size=1, max_size=12)),
            min_size=1,
            max_size=4,
        )
    )
    line = " ".join(parts)
    if not line.strip():
        line = "ok " + line
    return "\n".join([line] * draw(st.integers(1, max_repeat)))


TOOL_NAMES = ("bash", "read_file", "search", "memory")
PIN_MARK = "[[PINNED]]"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


# -- the abstract script ----------------------------------------------------------------------------


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    result: str
    is_error: bool = False
    result_image: bool = False


@dataclass
class Step:
    calls: list[Call]
    text: str | None = None
    thinking: str | None = None


@dataclass
class Turn:
    user: str
    image: bool = False
    steps: list[Step] = field(default_factory=list)
    final: str | None = "Done."
    thinking: str | None = None  # the turn's first assistant message opens with thinking
    system_before: str | None = None  # OpenAI: a system/developer message before this turn
    system_role: str = "system"
    pinned: bool = False  # the user message carries PIN_MARK
    result_text_after: str | None = None  # Anthropic: text after the results of the last step


@dataclass
class Script:
    turns: list[Turn]
    pending: bool = False  # the last turn ends with calls still waiting for results
    sdk: bool = False  # render some messages/blocks as SDK objects

    @property
    def has_mid_system(self) -> bool:
        return any(t.system_before for t in self.turns[1:])


@st.composite
def calls(draw: st.DrawFn) -> Call:
    name = draw(st.sampled_from(TOOL_NAMES))
    args: dict[str, Any] = {"cmd": draw(texts(max_repeat=3))}
    if draw(st.booleans()):
        args["path"] = draw(st.sampled_from(["/srv/app/billing/tax.py", "src/lib.rs", "docs/设计.md"]))
    if draw(st.booleans()):
        args["n"] = draw(st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=False, allow_infinity=False)))
    if draw(st.integers(0, 4)) == 0:  # a long argument, cut by micro-compaction
        args["content"] = draw(texts(max_repeat=60))
    return Call(
        name=name,
        args=args,
        result=draw(texts(max_repeat=60)),
        is_error=draw(st.integers(0, 5)) == 0,
        result_image=draw(st.integers(0, 6)) == 0,
    )


@st.composite
def steps(draw: st.DrawFn) -> Step:
    return Step(
        calls=draw(st.lists(calls(), min_size=1, max_size=3)),
        text=draw(st.one_of(st.none(), texts(max_repeat=3))),
        thinking=draw(st.one_of(st.none(), texts(max_repeat=5))) if draw(st.booleans()) else None,
    )


@st.composite
def turns(draw: st.DrawFn, fmt: str) -> Turn:
    pinned = draw(st.integers(0, 7)) == 0
    user = draw(texts(max_repeat=8))
    return Turn(
        user=(PIN_MARK + " " + user) if pinned else user,
        image=draw(st.integers(0, 4)) == 0,
        steps=draw(st.lists(steps(), max_size=4)),
        final=draw(st.one_of(st.just("Done."), texts(max_repeat=10))),
        thinking=draw(st.one_of(st.none(), texts(max_repeat=6))) if fmt == "anthropic" else None,
        system_before=(draw(st.one_of(st.none(), st.none(), texts(max_repeat=2))) if fmt == "openai" else None),
        system_role=draw(st.sampled_from(["system", "developer"])),
        pinned=pinned,
        result_text_after=(draw(st.one_of(st.none(), st.none(), texts(max_repeat=2))) if fmt == "anthropic" else None),
    )


@st.composite
def scripts(draw: st.DrawFn, fmt: str, min_turns: int = 1, max_turns: int = 6, pending: bool | None = None) -> Script:
    ts = draw(st.lists(turns(fmt), min_size=min_turns, max_size=max_turns))
    if pending is None:
        pending = draw(st.integers(0, 3)) == 0
    if pending and not ts[-1].steps:
        ts[-1].steps.append(draw(steps()))
    return Script(turns=ts, pending=pending, sdk=draw(st.booleans()))


# -- rendering ---------------------------------------------------------------------------------------


def _args_json(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


def _openai_call_obj(cid: str, c: Call) -> Any:
    from openai.types.chat import ChatCompletionMessageFunctionToolCall
    from openai.types.chat.chat_completion_message_function_tool_call import Function

    return ChatCompletionMessageFunctionToolCall(
        id=cid, type="function", function=Function(name=c.name, arguments=_args_json(c.args))
    )


def render_openai(script: Script, prefix: str = "c", system: str | None = None) -> list[Any]:
    """OpenAI Chat Completions messages (dicts; some assistant replies as ``ChatCompletionMessage``)."""
    from openai.types.chat import ChatCompletionMessage

    out: list[Any] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    last = len(script.turns) - 1
    sdk_toggle = 0
    for t_i, turn in enumerate(script.turns):
        if turn.system_before:
            out.append({"role": turn.system_role, "content": turn.system_before})
        if turn.image:
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": turn.user},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}},
                    ],
                }
            )
        else:
            out.append({"role": "user", "content": turn.user})
        for s_i, step in enumerate(turn.steps):
            ids = [f"{prefix}_{t_i}_{s_i}_{k}" for k in range(len(step.calls))]
            sdk_toggle += 1
            if script.sdk and sdk_toggle % 2:
                out.append(
                    ChatCompletionMessage(
                        role="assistant",
                        content=step.text,
                        tool_calls=[_openai_call_obj(cid, c) for cid, c in zip(ids, step.calls, strict=True)],
                    )
                )
            else:
                out.append(
                    {
                        "role": "assistant",
                        "content": step.text,
                        "tool_calls": [
                            {
                                "id": cid,
                                "type": "function",
                                "function": {"name": c.name, "arguments": _args_json(c.args)},
                            }
                            for cid, c in zip(ids, step.calls, strict=True)
                        ],
                    }
                )
            if script.pending and t_i == last and s_i == len(turn.steps) - 1:
                return out
            for cid, c in zip(ids, step.calls, strict=True):
                out.append({"role": "tool", "tool_call_id": cid, "content": c.result})
        if turn.final is not None:
            if script.sdk and t_i % 2:
                out.append(ChatCompletionMessage(role="assistant", content=turn.final))
            else:
                out.append({"role": "assistant", "content": turn.final})
    return out


def _anthropic_blocks(step_text: str | None, thinking: str | None, ids: list[str], step: Step, sdk: bool) -> list[Any]:
    from anthropic.types import TextBlock, ThinkingBlock, ToolUseBlock

    blocks: list[Any] = []
    if thinking is not None:
        sig = f"sig-{zlib.crc32(thinking.encode('utf-8', 'surrogatepass')):08x}"
        blocks.append(
            ThinkingBlock(type="thinking", thinking=thinking, signature=sig)
            if sdk
            else {"type": "thinking", "thinking": thinking, "signature": sig}
        )
    if step_text is not None:
        blocks.append(
            TextBlock(type="text", text=step_text, citations=None) if sdk else {"type": "text", "text": step_text}
        )
    for cid, c in zip(ids, step.calls, strict=True):
        blocks.append(
            ToolUseBlock(type="tool_use", id=cid, name=c.name, input=copy.deepcopy(c.args))
            if sdk
            else {"type": "tool_use", "id": cid, "name": c.name, "input": copy.deepcopy(c.args)}
        )
    return blocks


def render_anthropic(script: Script, prefix: str = "toolu") -> list[Any]:
    """Anthropic Messages messages (dicts; with ``sdk``, some assistant contents are lists of the
    SDK's ``TextBlock`` / ``ToolUseBlock`` / ``ThinkingBlock``, as the canonical loop appends them)."""
    from anthropic.types import TextBlock, ThinkingBlock

    out: list[Any] = []
    last = len(script.turns) - 1
    for t_i, turn in enumerate(script.turns):
        if turn.image:
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": turn.user},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    ],
                }
            )
        else:
            out.append({"role": "user", "content": turn.user})
        for s_i, step in enumerate(turn.steps):
            ids = [f"{prefix}_{t_i}_{s_i}_{k}" for k in range(len(step.calls))]
            # The turn's first assistant message opens with the turn's thinking (a thinking loop);
            # later steps may think again (interleaved thinking).
            thinking = turn.thinking if s_i == 0 else step.thinking if turn.thinking is not None else None
            sdk = script.sdk and (t_i + s_i) % 2 == 0
            out.append({"role": "assistant", "content": _anthropic_blocks(step.text, thinking, ids, step, sdk)})
            if script.pending and t_i == last and s_i == len(turn.steps) - 1:
                return out
            results: list[Any] = []
            for cid, c in zip(ids, step.calls, strict=True):
                r: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid}
                if c.result_image:
                    r["content"] = [
                        {"type": "text", "text": c.result},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    ]
                else:
                    r["content"] = c.result
                if c.is_error:
                    r["is_error"] = True
                results.append(r)
            if turn.result_text_after is not None and s_i == len(turn.steps) - 1:
                results.append({"type": "text", "text": turn.result_text_after})
            out.append({"role": "user", "content": results})
        if turn.final is not None:
            blocks: list[Any] = []
            if turn.thinking is not None and not turn.steps:
                sig = "sig-final"
                blocks.append(
                    ThinkingBlock(type="thinking", thinking=turn.thinking, signature=sig)
                    if script.sdk
                    else {"type": "thinking", "thinking": turn.thinking, "signature": sig}
                )
            blocks.append(
                TextBlock(type="text", text=turn.final, citations=None)
                if script.sdk and t_i % 2
                else {"type": "text", "text": turn.final}
            )
            out.append({"role": "assistant", "content": blocks if len(blocks) > 1 or t_i % 3 else turn.final})
    return out


def render(fmt: str, script: Script, prefix: str = "x", system: str | None = None) -> list[Any]:
    if fmt == "openai":
        return render_openai(script, prefix=f"call_{prefix}", system=system)
    return render_anthropic(script, prefix=f"toolu_{prefix}")


@dataclass
class Case:
    """A generated request: messages, the separate system prompt (Anthropic) and tools."""

    fmt: str
    script: Script
    messages: list[Any]
    system: Any
    tools: list[dict[str, Any]]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
    for name in TOOL_NAMES
]


@st.composite
def cases(
    draw: st.DrawFn,
    fmts: tuple[str, ...] = ("openai", "anthropic"),
    min_turns: int = 1,
    max_turns: int = 6,
    pending: bool | None = None,
) -> Case:
    fmt = draw(st.sampled_from(fmts))
    script = draw(scripts(fmt, min_turns=min_turns, max_turns=max_turns, pending=pending))
    sys_text = draw(st.one_of(st.none(), texts(max_repeat=3)))
    if fmt == "openai":
        messages = render(fmt, script, prefix="a", system=sys_text)
        system: Any = None
    else:
        messages = render(fmt, script, prefix="a")
        system = draw(
            st.sampled_from(
                [
                    sys_text,
                    [{"type": "text", "text": sys_text or "You are helpful.", "cache_control": {"type": "ephemeral"}}],
                ]
            )
        )
    tools = TOOLS if draw(st.booleans()) else []
    return Case(fmt, script, messages, system, tools)


# -- broken copies, for the repair path ------------------------------------------------------------

BREAKS = ("drop_result", "drop_call", "swap", "duplicate_result", "assistant_first", "empty_content", "orphan")


def _is_tool_msg(m: Any) -> bool:
    return isinstance(m, dict) and (
        m.get("role") == "tool"
        or (isinstance(m.get("content"), list) and any(_get(b, "type") == "tool_result" for b in m["content"]))
    )


def _has_calls(m: Any) -> bool:
    if isinstance(m, dict):
        if m.get("tool_calls"):
            return True
        c = m.get("content")
        return isinstance(c, list) and any(_get(b, "type") == "tool_use" for b in c)
    return bool(getattr(m, "tool_calls", None))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


@st.composite
def broken(draw: st.DrawFn, case: Case) -> tuple[list[Any], str]:
    """A copy of ``case.messages`` (the same objects, a new list) made invalid in one way."""
    msgs = list(case.messages)
    kind = draw(st.sampled_from(BREAKS))
    tool_idx = [i for i, m in enumerate(msgs) if _is_tool_msg(m)]
    call_idx = [i for i, m in enumerate(msgs) if _has_calls(m)]
    if kind == "drop_result" and tool_idx:
        del msgs[draw(st.sampled_from(tool_idx))]
    elif kind == "drop_call" and call_idx:
        del msgs[draw(st.sampled_from(call_idx))]
    elif kind == "swap" and len(msgs) >= 2:
        i = draw(st.integers(0, len(msgs) - 2))
        msgs[i], msgs[i + 1] = msgs[i + 1], msgs[i]
    elif kind == "duplicate_result" and tool_idx:
        i = draw(st.sampled_from(tool_idx))
        msgs.insert(i + 1, copy.deepcopy(msgs[i]))
    elif kind == "assistant_first":
        msgs.insert(0, {"role": "assistant", "content": "I start."})
    elif kind == "empty_content":
        msgs.insert(draw(st.integers(0, len(msgs))), {"role": "user", "content": ""})
    else:
        kind = "orphan"
        if case.fmt == "openai":
            orphan: dict[str, Any] = {"role": "tool", "tool_call_id": "call_nowhere", "content": "lost"}
        else:
            orphan = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nowhere"}]}
        msgs.insert(draw(st.integers(0, len(msgs))), orphan)
    return msgs, kind


# -- configurations ---------------------------------------------------------------------------------


@st.composite
def configs(draw: st.DrawFn, total_tokens: int, *, strict_ok: bool) -> dict[str, Any]:
    """Keyword arguments of ``ContextCompactor`` sized against a conversation of ``total_tokens``."""
    window = max(int(total_tokens * draw(st.sampled_from([0.08, 0.15, 0.3, 0.5, 0.8, 1.2, 3.0]))), 200)
    reserve = int(window * draw(st.sampled_from([0.0, 0.05, 0.2])))
    cfg: dict[str, Any] = {
        "max_context_tokens": window,
        "reserve_tokens": reserve,
        "trigger_ratio": draw(st.sampled_from([0.5, 0.8, 1.0])),
        "target_ratio": draw(st.sampled_from([0.2, 0.5, 0.7])),
        "keep_first_messages": draw(st.integers(0, 3)),
        "keep_recent_messages": draw(st.integers(0, 8)),
        "keep_recent_tokens": draw(st.one_of(st.none(), st.integers(0, max(window // 4, 1)))),
        "keep_recent_tool_results": draw(st.integers(0, 6)),
        "max_tool_arg_chars": draw(st.sampled_from([16, 80, 500])),
        "protected_tools": tuple(draw(st.lists(st.sampled_from(TOOL_NAMES), max_size=2, unique=True))),
        "clear_at_least_tokens": draw(st.sampled_from([0, 50, 2000])),
        "summary_max_tokens": draw(st.sampled_from([16, 200, 2000])),
        "summary_role": draw(st.sampled_from(["user", "system"])),
        "user_messages_budget_tokens": draw(st.sampled_from([0, 100, 2000])),
        "summarizer_max_input_tokens": draw(st.sampled_from([None, None, 256, 2000])),
        "transcript_item_max_chars": draw(st.sampled_from([16, 2000])),
        "min_savings_ratio": draw(st.sampled_from([0.0, 0.1, 0.5])),
        "message_overhead_tokens": draw(st.sampled_from([0, 4])),
        "image_tokens": draw(st.sampled_from([0, 85, 1600])),
        "on_summarizer_error": draw(st.sampled_from(["fallback", "fallback_all"])),
        "cooldown_calls": draw(st.sampled_from([0, 3])),
    }
    if strict_ok and draw(st.integers(0, 3)) == 0:
        cfg["profile"] = "strict"
    return cfg


# -- summarizers -------------------------------------------------------------------------------------


class RateLimitError(Exception):
    status_code = 429


class Overloaded(Exception):
    status_code = 529


#: Replies that fail (an exception, or a reply the shell must refuse); the others are usable.
FAILING = ("timeout", "rate_limit", "overloaded", "connection", "empty", "none", "int", "refusal", "error_text")
BEHAVIOURS = ("ok", "ok", "ok", "huge", "no_tags", *FAILING)


def reply_for(behaviour: str, req: Any) -> Any:
    """What a summarizer with ``behaviour`` does with ``req``; deterministic in the request."""
    if behaviour == "timeout":
        raise TimeoutError("the model did not answer")
    if behaviour == "rate_limit":
        raise RateLimitError("429 slow down")
    if behaviour == "overloaded":
        raise Overloaded("529 overloaded")
    if behaviour == "connection":
        raise ConnectionError("connection reset by peer")
    if behaviour == "empty":
        return "   "
    if behaviour == "none":
        return None
    if behaviour == "int":
        return 42
    if behaviour == "refusal":
        return "I'm sorry, but I can't help with that."
    if behaviour == "error_text":
        return "Error: 500 internal server error"
    if behaviour == "huge":
        return "<summary>" + "A very long summary sentence. " * 2000 + "</summary>"
    lines = [ln for ln in req.user_prompt.splitlines() if ln.strip()][:5]
    bullets = "\n".join("- " + ln[:80] for ln in lines)
    body = f"Summary of {req.replaced_count} messages (chunk {req.chunk + 1}/{req.chunks}).\n{bullets}"
    if req.previous_summary:
        body = req.previous_summary[:300] + "\n" + body
    if behaviour == "no_tags":
        return body
    return f"<summary>\n{body}\n</summary>"


class ScriptedSummarizer:
    """A summarizer that behaves as the drawn list says, call after call (cycling)."""

    def __init__(self, behaviours: list[str]) -> None:
        self.behaviours = behaviours or ["ok"]
        self.calls = 0
        self.requests: list[Any] = []

    def __call__(self, req: Any) -> Any:
        b = self.behaviours[self.calls % len(self.behaviours)]
        self.calls += 1
        self.requests.append(req)
        return reply_for(b, req)


summarizer_behaviours = st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=4)
