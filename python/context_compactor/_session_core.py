"""The part of :class:`~context_compactor.session.Session` that keeps its context: the in-memory
context in step with the store, the checks, and the saving of a compaction (:class:`SessionCore`).

A Session holds three parts: this core; the background policy
(:class:`~context_compactor._session_background.BackgroundPolicy`), which decides from the core's
checks when to start, apply or upgrade a background job; and the async methods
(:class:`~context_compactor._session_async.AsyncParts`), which drive the core from an event loop.
Each talks to the core through the public methods below; the core knows neither of them.

What the core holds: the rows of the context (``rows``), their messages (``msgs``) and token
counts (``tok``), the head compaction (``head``, ``upto``, ``head_system``) and where the store
was last read (``last_seq``, ``marker``). Every method that reads or changes them runs under
the store's lock (``store.locked()`` / ``store.alocked()``), held by its caller when it says so.
A compaction is computed on a :class:`Snapshot` without the lock and saved by :meth:`SessionCore.settle`
(the store's head check; the delta rule keeps what was appended meanwhile).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from context_compactor import _core
from context_compactor._codec import dumps as _dumps
from context_compactor._codec import encode as _encode
from context_compactor._codec import loads as _loads
from context_compactor._codec import usage_json as _usage_json
from context_compactor._codec import usage_tokens as _usage_tokens
from context_compactor._store import NewCompaction, Saved, SessionInfo, SessionStore, StoredContext
from context_compactor.compactor import CompactionCheck, ContextCompactor, Urgency
from context_compactor.errors import ConfigError, InvalidConversationError, MessageTypeError, StoreError
from context_compactor.results import CompactResult, RecordEntry

__all__ = [
    "ATTEMPTS",
    "FORMATS",
    "RESTORE_USAGE",
    "RETRY",
    "CompactionRecord",
    "Retry",
    "SessionCore",
    "Snapshot",
    "derive",
    "stored_format",
    "stored_json",
]

log = logging.getLogger("context_compactor")

#: Problems that make append/extend refuse a message: no later message makes it valid.
REFUSED_AT_APPEND = frozenset({"invalid_role", "malformed_block"})
#: Calibration is restored on reopen from at most this many usage reports.
RESTORE_USAGE = 4
#: prepare() gives up (StoreError) after losing this many races to other connections in a row.
ATTEMPTS = 5


class Retry:
    """The marker of a compaction attempt to run again (another connection compacted first)."""


RETRY = Retry()


@dataclass(frozen=True)
class Snapshot:
    """The context a compaction starts from."""

    messages: list[dict[str, Any]]
    rows: list[int]
    tokens: list[int]
    head: int | None
    upto_seq: int
    system: Any
    #: The compaction covers only the first ``covered`` messages (a background job rebased over a
    #: micro-compaction that cleared tool output meanwhile); the others are kept as they are.
    covered: int | None = None


@dataclass(frozen=True)
class CompactionRecord:
    """One persisted compaction of a :class:`Session`.

    Attributes:
        id: The record id (pass it to :meth:`Session.expand`).
        session_id: The session it belongs to.
        created_at: When it was saved (seconds since the epoch).
        strategy: ``"micro"``, ``"selective"``, ``"summary"``, ``"rule_summary"``, ``"truncation"``,
            or ``"none"`` for a repair-only record.
        summary: The summary text, if one was made.
        tokens_before: Tokens of the context before.
        tokens_after: Tokens of the context after.
        replaced: Row ids of the messages it replaced or edited, ascending (the rows of
            :attr:`record`; may include earlier summaries, which :meth:`Session.expand` resolves).
        record: What happened to each of those rows, as :class:`RecordEntry` with ``index`` a row id.
        upto_seq: It compacted the originals up to this position (1-based); later ones follow it.
        over_budget: Still above the soft threshold afterwards.
        fallback_reason: Why the summarizer's reply was not used, when so.
        must_keep: The must-keep facts of the replaced span.
    """

    id: int
    session_id: str
    created_at: float
    strategy: str
    summary: str | None
    tokens_before: int
    tokens_after: int
    replaced: tuple[int, ...]
    record: tuple[RecordEntry, ...]
    upto_seq: int
    over_budget: bool = False
    fallback_reason: str | None = None
    must_keep: tuple[str, ...] = ()

    def __repr__(self) -> str:
        summary = "None" if self.summary is None else f"<{len(self.summary):,} chars>"
        return (
            f"CompactionRecord(id={self.id}, strategy={self.strategy!r}, "
            f"tokens={self.tokens_before:,} -> {self.tokens_after:,}, replaced={len(self.replaced)}, "
            f"upto_seq={self.upto_seq}, over_budget={self.over_budget}, summary={summary})"
        )


#: The formats a Session keeps: every format the core reads.
FORMATS: tuple[str, ...] = _core.FORMATS

#: The formats the store's format column keeps: the two Chat formats, whose messages can look
#: alike. The others are detected from their messages on read, or given again when opened.
CHAT_FORMATS = ("openai", "anthropic")


def stored_format(format: str | None) -> str | None:
    """The format column of the store: the two Chat formats (the others are detected on read)."""
    return format if format in CHAT_FORMATS else None


def stored_json(value: Any, field: str) -> str:
    try:
        return _dumps(value)
    except (TypeError, ValueError) as e:
        raise MessageTypeError(f"{field} cannot be stored as JSON: {e}", None, field) from e


# -- the session ---------------------------------------------------------------------------------------


class SessionCore:
    """A Session's context, kept in step with its store (see the module's note).

    Args:
        compactor: The compactor whose config, counter and summarizer the Session uses.
        session_id: The session's id; a new random one when ``None``.
        format: The format forced, else ``None`` (detected from the messages).
    """

    def __init__(self, compactor: ContextCompactor, session_id: str | None, format: str | None) -> None:
        if not isinstance(compactor, ContextCompactor):
            raise MessageTypeError(
                f"compactor: expected a ContextCompactor, got {type(compactor).__name__}", None, "compactor"
            )
        if format not in (None, *FORMATS):
            raise ConfigError(f"format: expected {', '.join(map(repr, FORMATS))} or None, got {format!r}", "format")
        if session_id is not None and not isinstance(session_id, str):
            raise MessageTypeError(f"session_id: expected a str, got {type(session_id).__name__}", None, "session_id")
        self.compactor = compactor
        self.id = session_id if session_id is not None else uuid.uuid4().hex
        self.state = _core.ConversationState()
        #: Held by a prepare() (sync or async): one at a time per Session.
        self.compacting = threading.Lock()
        self.last_check: CompactionCheck | None = None
        #: The store, and whether the Session opened it (then it closes it).
        self.store: SessionStore
        self.own_store = False
        self.closed = False
        # The settings the store holds (JSON-decoded) and the format in use.
        self.stored_system: Any = None
        self.tools: list[Any] | None = None
        self.format: str | None = format
        self.fmt: str = format or "openai"
        # The in-memory context: rows, messages and their token counts, kept in step with the store.
        self.rows: list[int] = []
        self.msgs: list[dict[str, Any]] = []
        self.tok: list[int] = []
        self.raw = 0
        self.extra = 0
        self.head: int | None = None
        self.head_system: Any = None
        self.upto = 0
        self.last_seq = 0
        self.marker: Any = None
        #: What context() returned last, with its head (what record_usage() matches a report with).
        self.sent: tuple[list[dict[str, Any]], int | None] | None = None
        self.micro_at: int | None = None
        #: The snapshot the last foreground compaction (begin) started from.
        self.last_snap: Snapshot | None = None
        self.reload = False  # the in-memory context lost step: read all of it on the next refresh
        #: The result of the last foreground compaction attempt of a prepare(), saved or not (a
        #: refusal included), ``None`` when none was due: what ``replay`` reports per call.
        self.attempt: CompactResult | None = None

    @property
    def system(self) -> Any:
        """The system prompt to send now (a compaction's, else the stored one)."""
        return self.head_system if self.head_system is not None else self.stored_system

    def snapshot(self) -> Snapshot:
        """(Under the lock.) The context as it is now (remembered as ``last_snap``)."""
        snap = Snapshot(list(self.msgs), list(self.rows), list(self.tok), self.head, self.last_seq, self.system)
        self.last_snap = snap
        return snap

    def open_args(self, system: Any, tools: Sequence[Any] | None, format: str | None) -> dict[str, Any]:
        """The arguments of the store's ``open_session`` (JSON text)."""
        # Wrong types raise MessageTypeError naming "system" or "tools[k]" (a str is not a tool list).
        _core.validate_messages([], system=system, tools=tools, format=format)
        system_json = None if system is None else stored_json(system, "system")
        tools_json = None if tools is None else stored_json(list(tools), "tools")
        # The store's schema knows the two Chat formats; Responses items and Gemini contents are
        # detected from their types and parts whenever the session is read (a forced format is
        # kept for this object).
        return {"system": system_json, "tools": tools_json, "format": stored_format(format)}

    def open(self, system: Any, tools: Sequence[Any] | None, format: str | None) -> None:
        with self.store.locked():
            info = self.store.open_session(self.id, **self.open_args(system, tools, format))
            self.opened(info, format)
        self.calibrate(self.store.learned_usage(self.id, self.head, RESTORE_USAGE))

    def opened(self, info: SessionInfo, forced: str | None) -> None:
        """Take the settings and the context the store's ``open_session`` returned."""
        self.stored_system = _loads(info.system)
        self.tools = _loads(info.tools)
        self.format = forced if forced is not None and forced not in CHAT_FORMATS else info.format
        self.take(info.context)

    def take(self, ctx: StoredContext) -> None:
        """Make the in-memory context what the store said (the whole context, or the originals
        appended after the ones we hold)."""
        msgs = [json.loads(text) for _, text in ctx.rows]
        rows = [rid for rid, _ in ctx.rows]
        if ctx.complete:
            self.head, self.head_system, self.upto = ctx.head, _loads(ctx.system), ctx.upto_seq
            self.last_seq = ctx.last_seq
            self.rows, self.msgs = rows, msgs
            self.micro_at = None
            self.reload = False
            self.recount()
        elif rows:
            self.last_seq = ctx.last_seq
            self.add(rows, msgs)
        self.marker = ctx.marker

    def recount(self) -> None:
        """Detect the format (unless fixed) and count every message of the context and the extras."""
        counter = self.compactor.counter
        self.fmt = self.format or _core.detect_format(self.msgs, system=self.system, tools=self.tools)
        self.tok = list(counter.count_each(self.msgs, format=self.fmt).messages)
        self.raw = sum(self.tok)
        self.extra = counter.count_each([], system=self.system, tools=self.tools, format=self.fmt).total

    def add(self, rows: Sequence[int], msgs: Sequence[dict[str, Any]]) -> None:
        """Append to the in-memory context, counting only the new messages."""
        self.rows.extend(rows)
        self.msgs.extend(msgs)
        detected = _core.detect_format(msgs) if self.format is None else None
        if detected is not None and detected != "openai" and self.fmt != detected:
            # Detection's fallback is OpenAI; anything else (the first Anthropic-only block, a
            # Responses item, Gemini content) is the format.
            self.recount()
            return
        new = self.compactor.counter.count_each(msgs, format=self.fmt).messages
        self.tok.extend(new)
        self.raw += sum(new)

    def since(self) -> dict[str, Any]:
        """What to ask ``load_context`` for: what changed since the context we hold, or all of it."""
        return {} if self.reload else {"head": self.head, "after_seq": self.last_seq}

    def refresh(self) -> None:
        """Under the store lock: catch up with what other connections committed (appends,
        compactions), when the store's marker says anything was committed since we last looked."""
        marker = self.store.marker()
        if marker is not None and marker == self.marker:
            return
        try:
            self.take(self.store.load_context(self.id, **self.since()))
        except Exception as e:
            if isinstance(e, StoreError):
                raise
            raise StoreError(f"read: {type(e).__name__}: {e}") from e

    def calibrate(self, reports: list[tuple[int, int]]) -> None:
        """Re-learn the calibration from the latest usage reports measured on the current context."""
        rows = [r for r in reports if r[1] <= len(self.msgs)]
        if not rows:
            return
        msgs, system = list(self.msgs), self.system
        self.compactor.counter.count_each(msgs, system=system, tools=self.tools, format=self.fmt, state=self.state)
        for prompt_tokens, n in rows:
            self.state.observe_usage(prompt_tokens, messages=msgs[:n], system=system, tools=self.tools, format=self.fmt)

    def checked(self, messages: Iterable[Any]) -> list[tuple[dict[str, Any], str]]:
        """``extend``'s messages, checked and encoded: ``(message, JSON text)``."""
        if isinstance(messages, (str, bytes, bytearray, Mapping)) or not isinstance(messages, Iterable):
            raise MessageTypeError(
                f"messages: expected a list of messages, got {type(messages).__name__} (use append for one message)",
                None,
                "messages",
            )
        encoded = [_encode(m, i) for i, m in enumerate(messages)]
        if not encoded:
            return []
        plains = [p for p, _ in encoded]
        fmt = self.format or (self.fmt if self.fmt in ("anthropic", "gemini") else None)
        try:
            problems = _core.validate_messages(plains, format=fmt)
        except MessageTypeError as e:
            raise MessageTypeError(str(e), e.index, e.field) from e
        # What no later message can make valid: a role the format lacks, a block without a field
        # the provider requires. Stored, it would be sent as it is (context() is not repaired).
        refused = [p for p in problems if p.rule in REFUSED_AT_APPEND]
        if refused:
            raise InvalidConversationError(
                "; ".join(f"message {p.index}: {p.message} ({p.rule})" for p in refused) + ". Nothing was stored.",
                refused,
            )
        return encoded

    def appended(self, done: Any, plains: list[dict[str, Any]]) -> bool:
        """(Under the lock.) Add the rows just appended to the in-memory context, when it is in
        step with the store; ``False`` when another connection (or task) appended or compacted
        since we last looked: the caller reads what changed (these rows included)."""
        ids = list(done.ids)
        if done.head == self.head and done.first_seq == self.last_seq + 1:
            self.last_seq = done.first_seq + len(ids) - 1
            self.add(ids, plains)
            self.marker = done.marker
            return True
        self.marker = None
        return False

    def records(self, stored: Sequence[Any]) -> list[CompactionRecord]:
        out = []
        for c in stored:
            record = tuple(RecordEntry(*e) for e in c.record)
            out.append(
                CompactionRecord(
                    id=c.id,
                    session_id=self.id,
                    created_at=c.created_at,
                    strategy=c.strategy,
                    summary=c.summary,
                    tokens_before=c.tokens_before,
                    tokens_after=c.tokens_after,
                    replaced=tuple(sorted({e.index for e in record})),
                    record=record,
                    upto_seq=c.upto_seq,
                    over_budget=bool(c.details.get("over_budget")),
                    fallback_reason=c.details.get("fallback_reason"),
                    must_keep=tuple(c.details.get("must_keep", ())),
                )
            )
        return out

    def make_check(self) -> CompactionCheck:
        """The compactor's check of the current context, from the running counts (O(1))."""
        cfg = self.compactor.config
        raw = self.raw + self.extra
        state = self.state
        current = math.ceil(raw * state.calibration) if state.observations else raw
        # target_ratio="auto" may have set an earlier due point after the last compaction.
        soft = cfg.soft_threshold if state.due_at is None else min(cfg.soft_threshold, state.due_at)
        urgency: Urgency = "hard" if current >= cfg.hard_threshold else "soft" if current >= soft else "none"
        # The last compaction could not get under the soft threshold: none is due again until
        # the context grew by retry_growth_tokens (no compaction loops).
        hold = state.hold_until
        held = hold if urgency == "soft" and hold is not None and current < hold else None
        if held is not None:
            urgency = "none"
        return CompactionCheck(
            should_compact=urgency != "none",
            urgency=urgency,
            current_tokens=current,
            threshold=soft,
            hard_threshold=cfg.hard_threshold,
            budget=cfg.budget,
            target_tokens=cfg.target_tokens,
            raw_tokens=raw,
            calibration=state.calibration,
            message_count=len(self.msgs),
            micro_due=current >= cfg.micro_threshold,
            format=self.fmt,
            held_until=held,
        )

    def begin(self, force: bool) -> Snapshot | None:
        """Under the store lock: decide whether to compact and take the context to compact."""
        with self.store.locked():
            self.refresh()
            return self.decide(force)

    def decide(self, force: bool) -> Snapshot | None:
        """(Under the lock, after a refresh.) :meth:`_begin`'s decision."""
        check = self.make_check()
        self.last_check = check
        self.attempt = None
        # A model call: the growth per call (the hold, target_ratio="auto") is read from these.
        self.state.note_context(check.current_tokens)
        must = self.must_answer(check)
        if not self.msgs and not must:
            return None
        due = force or check.should_compact or must
        if not due and check.micro_due:
            # Micro-compaction clears old tool output once it frees clear_at_least_tokens:
            # try again only after the context grew by that much since the last try.
            step = max(1, self.compactor.config.clear_at_least_tokens)
            if self.micro_at is None or check.current_tokens >= self.micro_at + step:
                self.micro_at = check.current_tokens
                due = True
        if not due:
            return None
        return self.snapshot()

    def wait(self) -> float:
        return self.store.timeout + 2 * float(self.compactor.config.summarizer_timeout_s)

    def check_open(self) -> None:
        if self.closed:
            raise StoreError("the Session is closed")

    def settle(self, snap: Snapshot, result: CompactResult) -> CompactResult | Retry | None:
        """What :meth:`prepare` returns for one compaction attempt (see its Returns).

        A context over the budget is an invalid request (DESIGN invariant 5): whatever the
        planner said, the result says ``over_budget`` then, and the record saves it so. After
        another connection's compaction won the race, try again only when the context it left is
        still over the hard threshold or the budget (``None`` is never the answer there)."""
        self.attempt = result = self.budgeted(result)
        saved = self.commit(snap, result)
        with self.store.locked():
            self.refresh()
            must = self.must_answer(self.make_check())
        return self.settled(saved, must)

    def budgeted(self, result: CompactResult) -> CompactResult:
        cfg = self.compactor.config
        if result.tokens_after > cfg.budget and not result.over_budget:
            result = replace(
                result,
                over_budget=True,
                over_budget_reason=f"{result.tokens_after} tokens, over the budget {cfg.budget} "
                f"(max_context_tokens {cfg.max_context_tokens} - reserve {cfg.reserve}): "
                + (result.reason or "the compaction could not make it fit"),
            )
        return result

    @staticmethod
    def settled(saved: CompactResult | None, must: bool) -> CompactResult | Retry | None:
        if saved is None:
            return RETRY if must else None
        return saved if saved.changed or must else None

    def must_answer(self, check: CompactionCheck) -> bool:
        """At or over the hard threshold, or over the budget (a ``hard_threshold_tokens`` may sit
        above it): :meth:`prepare` must not answer ``None`` here."""
        return check.urgency == "hard" or check.current_tokens > check.budget

    def commit(self, snap: Snapshot, result: CompactResult) -> CompactResult | None:
        """Save a compaction (one transaction) and make its output the context; a result that
        changed nothing is returned unsaved. ``None`` when another connection compacted first."""
        if not (result.compacted or result.repairs):
            return result
        new, msgs, record, system_changed = self.compaction(snap, result)
        with self.store.locked():
            saved = self.store.save_compaction(self.id, new)
            if saved is None:
                self.lost_race()
                self.refresh()
                return None
            self.install(snap, saved, msgs, result, system_changed)
        return replace(result, record=record)

    def lost_race(self) -> None:
        log.warning("session %s: another connection compacted it meanwhile; this compaction is dropped", self.id)

    def compaction(self, snap: Snapshot, result: CompactResult) -> tuple[NewCompaction, list[Any], Any, bool]:
        """What :meth:`_commit` saves: the compaction, its context's messages, its record by row
        id, and whether it changed the system prompt."""
        rows = snap.rows
        record = tuple(replace(e, index=rows[e.index]) for e in result.record if 0 <= e.index < len(rows))
        entries = derive(snap, result)
        system_changed = result.system is not snap.system and result.system != snap.system
        details: dict[str, Any] = {
            "over_budget": result.over_budget,
            "over_budget_reason": result.over_budget_reason,
            "fallback_reason": result.fallback_reason,
            "summary_source": result.summary_source,
            "must_keep": list(result.must_keep),
            "must_keep_missing": list(result.must_keep_missing),
            "phases": [list(p) for p in result.phases],
            "repairs": list(result.repairs),
            "summary_truncated": result.summary_truncated,
            "original_count": result.original_count,
            "compacted_count": result.compacted_count,
            "context_count": len(entries),
            "derived_count": sum(1 for e in entries if e[0] is None),
            "record_count": len({(e.index, e.action) for e in record}),
        }
        if result.recalls:
            # recall=True: the originals the context's placeholders name (context_compactor.recall).
            details["recall"] = dict(result.recalls)
        context: list[tuple[int | None, str | None, str | None, str | None, int | None]] = []
        msgs: list[dict[str, Any]] = []
        for pos, (rid, msg, kind, source) in enumerate(entries):
            if rid is None:
                plain, text = _encode(msg, pos)
                context.append((None, kind, plain.get("role"), text, source))
                msgs.append(plain)
            else:
                context.append((rid, None, None, None, None))
                msgs.append(msg)
        new = NewCompaction(
            base_head=snap.head,
            upto_seq=snap.upto_seq,
            strategy=result.strategy,
            summary=result.summary,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            system=_dumps(result.system) if system_changed else None,
            details=details,
            context=tuple(context),
            record=tuple((e.index, e.action, e.detail) for e in record),
        )
        return new, msgs, record, system_changed

    def install(
        self, snap: Snapshot, saved: Saved, msgs: list[Any], result: CompactResult, system_changed: bool
    ) -> None:
        """(Under the lock.) Make a saved compaction's output the in-memory context, followed by
        the messages appended since its snapshot (the delta rule)."""
        new_rows = list(saved.rows)
        # Messages appended while the summarizer ran follow the new context (the delta rule).
        n = len(snap.messages)
        if self.head != snap.head or self.rows[:n] != snap.rows:
            # Out of step (an async store call's result applied late): read it all next time.
            self.reload, self.marker = True, None
            return
        tail_rows, tail_msgs, tail_tok = self.rows[n:], self.msgs[n:], self.tok[n:]
        known = dict(zip(snap.rows, snap.tokens, strict=True))
        fresh = [i for i, rid in enumerate(new_rows) if rid not in known]
        counts = self.compactor.counter.count_each([msgs[i] for i in fresh], format=self.fmt).messages
        known.update((new_rows[i], c) for i, c in zip(fresh, counts, strict=True))
        self.rows = new_rows + tail_rows
        self.msgs = msgs + tail_msgs
        self.tok = [known[r] for r in new_rows] + tail_tok
        self.raw = sum(self.tok)
        self.head, self.upto = saved.id, snap.upto_seq
        self.head_system = result.system if system_changed else None
        if system_changed:
            self.extra = self.compactor.counter.count_each(
                [], system=self.system, tools=self.tools, format=self.fmt
            ).total
        self.micro_at = None
        # Other connections may have appended since our last look: read them on the next call.
        self.marker = None

    def usage_report(self, usage: Any, model: str | None, sent: tuple[list[Any], int | None]) -> dict[str, Any]:
        """Learn from a usage report measured on ``sent`` (the context and its head) unless a
        compaction replaced it since; the arguments of the store's ``add_usage``."""
        msgs, head = sent
        system, fmt = self.system, self.fmt
        learned = False
        if head == self.head:
            self.compactor.counter.count_each(msgs, system=system, tools=self.tools, format=fmt, state=self.state)
            learned = bool(self.state.observe_usage(usage, messages=msgs, system=system, tools=self.tools, format=fmt))
        return {
            "model": model,
            "prompt_tokens": _usage_tokens(usage),
            "usage": _usage_json(usage),
            "head": head,
            "context_len": len(msgs),
            "learned": learned,
        }


def derive(snap: Snapshot, result: CompactResult) -> list[tuple[int | None, dict[str, Any], str, int | None]]:
    """Each message of ``result.messages`` as ``(row id or None, message, kind, source row)``, from
    ``result.origins`` (the core says where each one came from: nothing is guessed from text, so
    a user message that quotes the summary marker stays the user's)."""
    out: list[tuple[int | None, dict[str, Any], str, int | None]] = []
    for m, (kind, i) in zip(result.messages, result.origins, strict=True):
        if kind == "kept":
            assert i is not None
            # The snapshot's message: the same object, or, for a rebased job, the copy a
            # micro-compaction made meanwhile (stored under that row).
            out.append((snap.rows[i], snap.messages[i], "original", None))
            continue
        plain = m if isinstance(m, dict) else dict(m)
        if kind == "edited":
            assert i is not None
            out.append((None, plain, "edited", snap.rows[i]))
        else:
            out.append((None, plain, kind, None))
    if snap.covered is not None:
        out.extend((snap.rows[j], snap.messages[j], "original", None) for j in range(snap.covered, len(snap.rows)))
    return out
