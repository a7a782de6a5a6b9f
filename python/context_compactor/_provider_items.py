"""Placing a native strategy's provider items (DESIGN: "Provider compaction output").

The planner stays pure: the plan is applied with the rule summary, which fixes the span (a legal
cut: it never ends on an unanswered call, micro-compaction already ran on what is kept), and the
one summary message is then swapped for the provider's items:

- OpenAI (``responses.compact``): the returned user messages and the one ``compaction`` item sit
  where the summary was; the kept head (system, task) and tail stay as they are.
- Anthropic (the ``compaction`` beta): the provider requires the block to open the conversation,
  so the assistant message holding it comes first and the kept head is dropped (recorded); the
  task is re-sent as a user message right after it unless the block's readable ``content`` holds
  the task's opening words.

Must-keep facts the items do not show (OpenAI's item is encrypted) follow as a "Preserved
details" user message. The result must pass ``validate_messages``; otherwise
:class:`~context_compactor._summarize.BadReply` is raised and the compactor falls back to the
local summary with ``fallback_reason`` set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from context_compactor import _core
from context_compactor._summarize import BadReply
from context_compactor.results import CompactResult, RecordEntry, SummaryResponse

__all__ = ["place_items", "span_of"]

_PRESERVED = {
    "en": "Preserved details (not visible in the provider's compaction):",
    "zh": "保留的细节（服务商的压缩内容中看不到）：",
}


def span_of(plan: Any, messages: Sequence[Any]) -> tuple[Any, ...]:
    """The input messages the plan's summary replaces, in order, as given."""
    rows = plan.apply(None).record
    idx = sorted({e.index for e in rows if e.action == "summarized"})
    return tuple(messages[i] for i in idx if 0 <= i < len(messages))


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _text(message: Any) -> str:
    """The readable text of a message or item (strings and text/content parts)."""
    content = _get(message, "content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for p in content or ():
        if isinstance(p, str):
            parts.append(p)
            continue
        for key in ("text", "content"):
            v = _get(p, key)
            if isinstance(v, str):
                parts.append(v)
                break
    return "\n".join(parts)


def _opening(text: str) -> str:
    """The task's opening words: its first 60 characters, whitespace normalised (CJK-safe)."""
    return " ".join(text.split())[:60]


def place_items(plan: Any, reply: SummaryResponse, **extra: Any) -> CompactResult:
    """The plan applied with ``reply.items`` in place of the summary message (see the module doc)."""
    source = reply.summary_source or "provider"
    items = list(reply.items or ())
    if not items:
        raise BadReply(f"{source} returned no items")
    rule: CompactResult = plan.apply(None, **extra)
    slots = [k for k, (kind, _) in enumerate(rule.origins) if kind == "summary"]
    if len(slots) != 1:
        raise BadReply(f"no single summary slot to place the items of {source} in")
    at = slots[0]
    head, tail = list(rule.messages[:at]), list(rule.messages[at + 1 :])
    head_o, tail_o = list(rule.origins[:at]), list(rule.origins[at + 1 :])
    visible = "\n".join(_text(m) for m in items)
    record = list(rule.record)
    if source == "provider:anthropic":
        task_at = next((k for k, m in enumerate(head) if _get(m, "role") == "user"), None)
        new = list(items)
        origins: list[tuple[str, int | None]] = [("summary", None)] * len(items)
        resend = task_at is not None and _opening(_text(head[task_at])) not in " ".join(visible.split())
        for k, (kind, i) in enumerate(head_o):
            if resend and k == task_at:
                continue
            if i is not None and kind in ("kept", "edited"):
                record.append(RecordEntry(i, "dropped", "before the provider's compaction block"))
        if resend and task_at is not None:
            new.append(head[task_at])
            origins.append(head_o[task_at])
    else:
        new = head + items
        origins = head_o + [("summary", None)] * len(items)
    missing = tuple(f for f in rule.must_keep if f not in visible)
    if missing:
        title = _PRESERVED.get(rule.language, _PRESERVED["en"])
        new.append({"role": "user", "content": title + "\n" + "\n".join(f"- {f}" for f in missing)})
        origins.append(("inserted", None))
    new += tail
    origins += tail_o
    problems = _core.validate_messages(new, system=rule.system)
    if problems:
        p = problems[0]
        raise BadReply(f"the items of {source} do not make a valid request: {p.rule} at message {p.index}: {p.message}")
    # The rule result's count (system, tools, overheads) with its messages swapped for the new ones.
    was = _core.measure(rule.messages, system=rule.system, tokenizer=plan._tokenizer)
    now = _core.measure(new, system=rule.system, tokenizer=plan._tokenizer)
    retained = sum(1 for kind, _ in origins if kind in ("kept", "edited"))
    return replace(
        rule,
        messages=new,
        summary=reply.text or visible or None,
        summary_source=source,
        strategy="summary",
        tokens_after=rule.tokens_after - sum(was.messages) + sum(now.messages),
        retained_count=retained,
        compacted_count=rule.original_count - retained,
        origins=tuple(origins),
        record=tuple(record),
        must_keep_missing=(),
        summary_truncated=bool(reply.truncated),
    )
