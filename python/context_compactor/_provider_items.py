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

The ledger (DESIGN, "The ledger") follows the items as a user message that starts with the
summary marker: the rule result's ledger, with the must-keep facts the items do not show (OpenAI's
item is encrypted) in its preserved details. It is left out of the span the provider is sent
(:func:`span_of`), and a copy the provider returns is dropped. The result must pass
``validate_messages``; otherwise :class:`~context_compactor._summarize.BadReply` is raised and
the compactor falls back to the local summary with ``fallback_reason`` set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from context_compactor import _core
from context_compactor._summarize import BadReply
from context_compactor.results import CompactResult, RecordEntry, SummaryResponse

__all__ = ["place_items", "span_of"]

_SENTINEL = _core.LEDGER_SENTINEL


def _ours(message: Any) -> bool:
    """Whether a message or item is a summary the library wrote (our ledger message): a
    user/system/developer message whose text starts with the marker."""
    role = _get(message, "role")
    return role in ("user", "system", "developer") and _text(message).lstrip().startswith(_core.SUMMARY_MARKER)


def span_of(plan: Any, messages: Sequence[Any]) -> tuple[Any, ...]:
    """The input messages the plan's summary replaces, in order, as given; our earlier summary
    (the ledger message) left out: the library carries its ledger itself."""
    rows = plan.apply(None).record
    idx = sorted({e.index for e in rows if e.action == "summarized"})
    return tuple(messages[i] for i in idx if 0 <= i < len(messages) and not _ours(messages[i]))


def _ledger_message(summary: str, missing: Sequence[str], language: str) -> str | None:
    """The ledger message that follows a provider's items: the marker, then the rule result's
    ledger (its sentinel and sections), with the must-keep facts the items do not show added to
    its preserved details."""
    at = summary.find(_SENTINEL)
    ledger = summary[at:] if at >= 0 else _SENTINEL
    present = [f for f in missing if f not in ledger]
    if present:
        header = "保留的细节：" if "\n保留的细节：" in ledger or language == "zh" else "Preserved details:"
        lines = "".join(f"\n- {f}" for f in present)
        if f"\n{header}" in ledger:
            start = ledger.index(f"\n{header}") + len(header) + 1
            nxt = [i for h in ("\nArtifact trail:", "\n文件变更记录：") if (i := ledger.find(h, start)) >= 0]
            end = min(nxt) if nxt else len(ledger)
            ledger = ledger[:end] + lines + ledger[end:]
        else:
            nxt = [i for h in ("\nArtifact trail:", "\n文件变更记录：") if (i := ledger.find(h)) >= 0]
            end = min(nxt) if nxt else len(ledger)
            ledger = ledger[:end] + f"\n{header}" + lines + ledger[end:]
    if ledger.strip() == _SENTINEL:
        return None
    intro = (
        "此前的对话已由服务商压缩。"
        if language == "zh"
        else "The earlier part of this conversation was compacted by the provider."
    )
    return f"{_core.SUMMARY_MARKER} {intro}\n\n{ledger}"


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
    # A copy of our ledger message the provider returned (OpenAI returns user messages) is
    # dropped: the library writes the ledger after the items itself.
    items = [m for m in reply.items or () if not _ours(m)]
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
    # The ledger (the user's words, details, trail) after the items, in a message of ours that
    # carries the marker: read back by the next compaction, never sent to the provider.
    ledger = _ledger_message(rule.summary or "", missing, rule.language)
    if ledger is not None:
        new.append({"role": "user", "content": ledger})
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
