"""`Session`: a conversation persisted in SQLite that compacts itself when it has to.

The piece agent builders put in their loop (seed 002's session integration, seed 003's database
design): append what the agent produces, call :meth:`Session.prepare` before each model call, send
:meth:`Session.context`. Every original message stays in the store; compactions only change what
is sent. The store's operations and the delta rule are described in :mod:`context_compactor._store`
(SQL in :mod:`context_compactor._sqlite`), background compaction in
:mod:`context_compactor._background` and :mod:`context_compactor._session_background`.

(Over 600 lines: one public class whose methods share the in-memory context and its lock; about
half of it is the API's docstrings. What could leave did: SQL, encoders, the background policy.)

Example:
    >>> from context_compactor import ContextCompactor
    >>> from context_compactor.session import Session
    >>> session = Session(ContextCompactor(max_context_tokens=200_000), ":memory:")
    >>> row = session.append({"role": "user", "content": "Fix the failing test."})
    >>> session.prepare() is None          # far below the window: nothing to do
    True
    >>> session.context()
    [{'role': 'user', 'content': 'Fix the failing test.'}]

At or over the hard threshold :meth:`Session.prepare` always returns its result, and when the
context still does not fit the window the result says ``over_budget=True``: never send it then.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from context_compactor import _core
from context_compactor._codec import dumps as _dumps
from context_compactor._codec import encode as _encode
from context_compactor._codec import loads as _loads
from context_compactor._codec import usage_json as _usage_json
from context_compactor._codec import usage_tokens as _usage_tokens
from context_compactor._session_async import _ATTEMPTS, AsyncMethods
from context_compactor._session_async import RESTORE_USAGE as _RESTORE_USAGE
from context_compactor._session_background import _RETRY, BackgroundCompaction, Job, _Retry, _Snapshot
from context_compactor._store import NewCompaction, Saved, SessionInfo, SessionStore, StoredContext
from context_compactor._summarize import call_hook_sync
from context_compactor.compactor import CompactionCheck, ContextCompactor, Urgency
from context_compactor.errors import (
    ConfigError,
    InvalidConversationError,
    MessageTypeError,
    StoreError,
)
from context_compactor.results import CompactResult, RecordEntry

__all__ = ["CompactionRecord", "Session", "SessionStore"]

log = logging.getLogger("context_compactor")

#: Problems that make append/extend refuse a message: no later message makes it valid.
_REFUSED_AT_APPEND = frozenset({"invalid_role", "malformed_block"})


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


def _stored_json(value: Any, field: str) -> str:
    try:
        return _dumps(value)
    except (TypeError, ValueError) as e:
        raise MessageTypeError(f"{field} cannot be stored as JSON: {e}", None, field) from e


# -- the session ---------------------------------------------------------------------------------------


class Session(BackgroundCompaction, AsyncMethods):
    """A conversation kept in a SQLite store, compacted when it has to be.

    Opens the session ``session_id`` in ``store`` if it exists, else creates it. Append what the
    agent produces; before each model call run :meth:`prepare` (which checks the context against
    the compactor's thresholds and compacts when needed, persisting the outcome), then send
    :meth:`context` (and :attr:`system`, :attr:`tools`). Originals are never lost:
    :meth:`history` returns them all and :meth:`expand` returns those a compaction replaced.

    Messages may be dicts or the ``openai``/``anthropic`` SDKs' pydantic objects (also inside
    dicts, e.g. ``{"role": "assistant", "content": response.content}``). They are converted with
    ``model_dump(mode="json", exclude_none=True)`` and stored as JSON, so :meth:`context`,
    :meth:`history` and :meth:`expand` always return plain dicts, the same before and after a
    reopen. Do not modify the dicts they return.

    ``result.record`` of a Session's compaction names **row ids** (DESIGN, Invariant 6): the ids
    :meth:`append` returned; summaries and edited copies get row ids too.

    Thread-safe: threads and asyncio tasks sharing a Session are serialised (appends wait for
    each other; a second ``prepare()`` waits for a running one, and appends are not blocked
    while the summarizer runs). Several processes may share one file; each sees the others'
    appends and compactions. A lock held longer than ``timeout`` raises :class:`StoreError`.

    Args:
        compactor: The :class:`ContextCompactor` (its config and summarizer are used).
        store: A SQLite path, ``":memory:"``, or a :class:`SessionStore` to share a connection.
        session_id: The session to open or create; a new random id when ``None``.
        system: The system prompt (Anthropic's separate one; OpenAI keeps it in the messages).
            ``None`` keeps the stored one; a value replaces it in the store.
        tools: Tool definitions (``None`` keeps the stored ones).
        format: ``"openai"``, ``"anthropic"`` or ``"responses"``; detected from the messages when ``None``.
        timeout: Seconds to wait for a lock when ``store`` is a path (a :class:`SessionStore`
            has its own).

    Raises:
        MessageTypeError: An argument of the wrong type (``.field`` names it: ``"compactor"``,
            ``"store"``, ``"session_id"``, ``"system"``, ``"tools"``, ``"tools[2]"``, ...).
        ConfigError: ``format`` is not one of the formats.
        StoreError: The store cannot be opened or stays locked.

    Example:
        >>> session = Session(compactor, "agent.db", "ticket-42", system="You are a coding agent.")
        >>> session.append({"role": "user", "content": "Fix the failing test."})    # its row id
        1
        >>> result = session.prepare()        # None, or the CompactResult (record by row id)
        >>> messages = session.context()      # what to send now
    """

    def __init__(
        self,
        compactor: ContextCompactor,
        store: str | os.PathLike[str] | SessionStore,
        session_id: str | None = None,
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._setup(compactor, session_id, format)
        if isinstance(store, SessionStore):
            self._store, self._own_store = store, False
        elif isinstance(store, (str, os.PathLike)):
            # SessionStore(target, timeout=...) is a factory: __new__ picks the backend's class,
            # whose constructor takes the target (the abstract base's takes only the timeout).
            open_store: Callable[..., SessionStore] = SessionStore
            self._store, self._own_store = open_store(store, timeout=timeout), True
        else:
            raise MessageTypeError(
                f"store: expected a path, ':memory:' or a SessionStore, got {type(store).__name__}", None, "store"
            )
        try:
            self._open(system, tools, format)
        except BaseException:
            if self._own_store:
                self._store.close()
            raise

    def _setup(self, compactor: ContextCompactor, session_id: str | None, format: str | None) -> None:
        """Check the arguments and set the in-memory state of an empty session (no store yet)."""
        if not isinstance(compactor, ContextCompactor):
            raise MessageTypeError(
                f"compactor: expected a ContextCompactor, got {type(compactor).__name__}", None, "compactor"
            )
        if format not in (None, "openai", "anthropic", "responses"):
            raise ConfigError(f"format: expected 'openai', 'anthropic', 'responses' or None, got {format!r}", "format")
        if session_id is not None and not isinstance(session_id, str):
            raise MessageTypeError(f"session_id: expected a str, got {type(session_id).__name__}", None, "session_id")
        self._compactor = compactor
        self._id = session_id if session_id is not None else uuid.uuid4().hex
        self._state = _core.ConversationState()
        self._compacting = threading.Lock()
        self.last_check: CompactionCheck | None = None
        # The in-memory context: rows, messages and their token counts, kept in step with the store.
        self._rows: list[int] = []
        self._msgs: list[dict[str, Any]] = []
        self._tok: list[int] = []
        self._raw = 0
        self._extra = 0
        self._head: int | None = None
        self._head_system: Any = None
        self._upto = 0
        self._last_seq = 0
        self._marker: Hashable | None = None
        self._sent: tuple[list[dict[str, Any]], int | None] | None = None
        self._micro_at: int | None = None
        self._job: Job | None = None
        self._carry: str | None = None
        self._rules: ContextCompactor | None = None
        self._closed = False
        self._reload = False  # the in-memory context lost step: read all of it on the next refresh

    # -- opening and syncing ----------------------------------------------------------------------------

    def _open_args(self, system: Any, tools: Sequence[Any] | None, format: str | None) -> dict[str, Any]:
        """The arguments of the store's ``open_session`` (JSON text)."""
        # Wrong types raise MessageTypeError naming "system" or "tools[k]" (a str is not a tool list).
        _core.validate_messages([], system=system, tools=tools, format=format)
        system_json = None if system is None else _stored_json(system, "system")
        tools_json = None if tools is None else _stored_json(list(tools), "tools")
        # The store's schema knows the two Chat formats; Responses items are detected from their
        # types whenever the session is read (a forced "responses" is kept for this object).
        return {"system": system_json, "tools": tools_json, "format": None if format == "responses" else format}

    def _open(self, system: Any, tools: Sequence[Any] | None, format: str | None) -> None:
        with self._store.locked():
            info = self._store.open_session(self._id, **self._open_args(system, tools, format))
            self._opened(info, format)
        self._calibrate(self._store.learned_usage(self._id, self._head, _RESTORE_USAGE))

    def _opened(self, info: SessionInfo, forced: str | None) -> None:
        """Take the settings and the context the store's ``open_session`` returned."""
        self._system = _loads(info.system)
        self._tools: list[Any] | None = _loads(info.tools)
        self._format: str | None = "responses" if forced == "responses" else info.format
        self._take(info.context)

    def _take(self, ctx: StoredContext) -> None:
        """Make the in-memory context what the store said (the whole context, or the originals
        appended after the ones we hold)."""
        msgs = [json.loads(text) for _, text in ctx.rows]
        rows = [rid for rid, _ in ctx.rows]
        if ctx.complete:
            self._head, self._head_system, self._upto = ctx.head, _loads(ctx.system), ctx.upto_seq
            self._last_seq = ctx.last_seq
            self._rows, self._msgs = rows, msgs
            self._micro_at = None
            self._reload = False
            self._recount()
        elif rows:
            self._last_seq = ctx.last_seq
            self._add(rows, msgs)
        self._marker = ctx.marker

    def _recount(self) -> None:
        """Detect the format (unless fixed) and count every message of the context and the extras."""
        counter = self._compactor.counter
        self._fmt = self._format or _core.detect_format(self._msgs, system=self.system, tools=self._tools)
        self._tok = list(counter.count_each(self._msgs, format=self._fmt).messages)
        self._raw = sum(self._tok)
        self._extra = counter.count_each([], system=self.system, tools=self._tools, format=self._fmt).total

    def _add(self, rows: Sequence[int], msgs: Sequence[dict[str, Any]]) -> None:
        """Append to the in-memory context, counting only the new messages."""
        self._rows.extend(rows)
        self._msgs.extend(msgs)
        detected = _core.detect_format(msgs) if self._format is None else None
        if detected in ("anthropic", "responses") and self._fmt != detected:
            self._recount()  # the first Anthropic-only block or Responses item: that is the format
            return
        new = self._compactor.counter.count_each(msgs, format=self._fmt).messages
        self._tok.extend(new)
        self._raw += sum(new)

    def _since(self) -> dict[str, Any]:
        """What to ask ``load_context`` for: what changed since the context we hold, or all of it."""
        return {} if self._reload else {"head": self._head, "after_seq": self._last_seq}

    def _refresh(self) -> None:
        """Under the store lock: catch up with what other connections committed (appends,
        compactions), when the store's marker says anything was committed since we last looked."""
        marker = self._store.marker()
        if marker is not None and marker == self._marker:
            return
        try:
            self._take(self._store.load_context(self._id, **self._since()))
        except Exception as e:
            if isinstance(e, StoreError):
                raise
            raise StoreError(f"read: {type(e).__name__}: {e}") from e

    def _calibrate(self, reports: list[tuple[int, int]]) -> None:
        """Re-learn the calibration from the latest usage reports measured on the current context."""
        rows = [r for r in reports if r[1] <= len(self._msgs)]
        if not rows:
            return
        msgs, system = list(self._msgs), self.system
        self._compactor.counter.count_each(msgs, system=system, tools=self._tools, format=self._fmt, state=self._state)
        for prompt_tokens, n in rows:
            self._state.observe_usage(
                prompt_tokens, messages=msgs[:n], system=system, tools=self._tools, format=self._fmt
            )

    # -- properties ----------------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self._id

    @property
    def compactor(self) -> ContextCompactor:
        """The compactor in use."""
        return self._compactor

    @property
    def store(self) -> SessionStore:
        """The store."""
        return self._store

    @property
    def state(self) -> _core.ConversationState:
        """The :class:`ConversationState` (cached counts, calibration, cool-down) of this Session."""
        return self._state

    @property
    def system(self) -> Any:
        """The system prompt to send now: the stored one, or, after a compaction with
        ``summary_role="system"`` on Anthropic, the one that compaction returned."""
        return self._head_system if self._head_system is not None else self._system

    @property
    def tools(self) -> list[Any] | None:
        """The tool definitions to send."""
        return self._tools

    @property
    def format(self) -> str:
        """The format in use: the one given, else the one detected from the messages."""
        with self._store.locked():
            self._refresh()
            return self._fmt

    def __len__(self) -> int:
        """Number of original messages (the history)."""
        with self._store.locked():
            self._refresh()
            return self._last_seq

    # -- appending -------------------------------------------------------------------------------------------

    def append(self, message: Any) -> int:
        """Store one message (one transaction) and add it to the context.

        Args:
            message: A dict or an SDK message object (stored as JSON, returned as a dict).

        Returns:
            Its row id.

        Raises:
            MessageTypeError: Not a message (no mapping, no ``role`` str, content of a wrong type)
                or not storable as JSON (a value JSON cannot hold, a cycle, nesting too deep);
                ``.index`` and ``.field`` say where. Nothing is stored.
            InvalidConversationError: A message no later one can make valid: a role the format
                does not have (``invalid_role``) or a block without a field the provider requires
                (``malformed_block``); ``.problems`` lists them. Nothing is stored.
            StoreError: The store could not be written.

        Example:
            >>> len(session.context())
            40
            >>> session.append({"role": "user", "content": "hi"})    # the row id
            41
        """
        return self.extend([message])[0]

    def extend(self, messages: Iterable[Any]) -> list[int]:
        """Store several messages in one transaction (all or none) and add them to the context.

        Returns:
            Their row ids, in order.

        Raises:
            MessageTypeError: ``messages`` is a str, a dict or not iterable (``.field`` is
                ``"messages"``), or one message is not one (see :meth:`append`).
            InvalidConversationError: See :meth:`append`.

        Example:
            >>> session.extend([assistant_message, *tool_results])   # a call and its result
            [41, 42]
        """
        encoded = self._checked(messages)
        if not encoded:
            return []
        with self._store.locked():
            done = self._store.append_rows(self._id, [(plain.get("role"), text) for plain, text in encoded])
            if not self._appended(done, [p for p, _ in encoded]):
                self._refresh()
        return list(done.ids)

    def _checked(self, messages: Iterable[Any]) -> list[tuple[dict[str, Any], str]]:
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
        fmt = self._format or ("anthropic" if self._fmt == "anthropic" else None)
        try:
            problems = _core.validate_messages(plains, format=fmt)
        except MessageTypeError as e:
            raise MessageTypeError(str(e), e.index, e.field) from e
        # What no later message can make valid: a role the format lacks, a block without a field
        # the provider requires. Stored, it would be sent as it is (context() is not repaired).
        refused = [p for p in problems if p.rule in _REFUSED_AT_APPEND]
        if refused:
            raise InvalidConversationError(
                "; ".join(f"message {p.index}: {p.message} ({p.rule})" for p in refused) + ". Nothing was stored.",
                refused,
            )
        return encoded

    def _appended(self, done: Any, plains: list[dict[str, Any]]) -> bool:
        """(Under the lock.) Add the rows just appended to the in-memory context, when it is in
        step with the store; ``False`` when another connection (or task) appended or compacted
        since we last looked: the caller reads what changed (these rows included)."""
        ids = list(done.ids)
        if done.head == self._head and done.first_seq == self._last_seq + 1:
            self._last_seq = done.first_seq + len(ids) - 1
            self._add(ids, plains)
            self._marker = done.marker
            return True
        self._marker = None
        return False

    # -- reading ----------------------------------------------------------------------------------------------

    def context(self) -> list[dict[str, Any]]:
        """What to send now: the latest compaction's output, then the messages appended after it.

        The Session remembers what it returned: :meth:`record_usage` matches the provider's usage
        report with it.

        Example:
            >>> response = client.chat.completions.create(model="gpt-4o", messages=session.context())
        """
        with self._store.locked():
            self._refresh()
            snapshot = list(self._msgs)
            self._sent = (snapshot, self._head)
            return list(snapshot)

    def context_ids(self) -> list[int]:
        """The row ids of :meth:`context`, in order."""
        with self._store.locked():
            self._refresh()
            return list(self._rows)

    def history(self) -> list[dict[str, Any]]:
        """Every original message, in the order appended (never compacted)."""
        return [json.loads(text) for _, text in self._store.history(self._id)]

    def history_ids(self) -> list[int]:
        """The row ids of :meth:`history`, in order."""
        return [rid for rid, _ in self._store.history(self._id)]

    def message(self, row_id: int) -> dict[str, Any]:
        """The message stored under ``row_id`` (an original, a summary or an edited copy).

        Raises:
            KeyError: No such row in this session.
        """
        text = self._store.message(self._id, row_id)
        if text is None:
            raise KeyError(row_id)
        return json.loads(text)  # type: ignore[no-any-return]

    def compactions(self) -> list[CompactionRecord]:
        """Every compaction of this session, oldest first.

        Example:
            >>> session.prepare(force=True).strategy        # the /compact command
            'summary'
            >>> for c in session.compactions():
            ...     print(c.id, c.strategy, c.tokens_before, c.tokens_after, len(c.replaced))
            1 summary 4440 ... ...
        """
        return self._records(self._store.compactions(self._id))

    def _records(self, stored: Sequence[Any]) -> list[CompactionRecord]:
        out = []
        for c in stored:
            record = tuple(RecordEntry(*e) for e in c.record)
            out.append(
                CompactionRecord(
                    id=c.id,
                    session_id=self._id,
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

    def expand(self, record_id: int) -> list[dict[str, Any]]:
        """The original messages a compaction replaced or edited, exactly as appended, in order.

        Rows it names that are themselves products of earlier compactions are resolved: an
        earlier summary stands for the originals that compaction removed, an edited copy for
        its original.

        Raises:
            KeyError: No such compaction in this session.

        Example:
            >>> result = session.prepare(force=True)
            >>> record = session.compactions()[-1]
            >>> originals = session.expand(record.id)           # the messages it replaced, as appended
            >>> len(originals) == len(record.replaced), originals[0] == session.history()[record.replaced[0] - 1]
            (True, True)
        """
        return [json.loads(text) for text in self._store.expand(self._id, record_id)]

    # -- checking and compacting --------------------------------------------------------------------------------

    def _make_check(self) -> CompactionCheck:
        """The compactor's check of the current context, from the running counts (O(1))."""
        cfg = self._compactor.config
        raw = self._raw + self._extra
        state = self._state
        current = math.ceil(raw * state.calibration) if state.observations else raw
        urgency: Urgency = (
            "hard" if current >= cfg.hard_threshold else "soft" if current >= cfg.soft_threshold else "none"
        )
        return CompactionCheck(
            should_compact=urgency != "none",
            urgency=urgency,
            current_tokens=current,
            threshold=cfg.soft_threshold,
            hard_threshold=cfg.hard_threshold,
            budget=cfg.budget,
            target_tokens=cfg.target_tokens,
            raw_tokens=raw,
            calibration=state.calibration,
            message_count=len(self._msgs),
            micro_due=current >= cfg.micro_threshold,
            format=self._fmt,
        )

    def check(self) -> CompactionCheck:
        """Where the current context stands against the window (the same values as
        ``compactor.check(session.context(), system=..., tools=..., state=session.state)``), from
        counts kept up to date on each append: its cost does not grow with the conversation."""
        with self._store.locked():
            self._refresh()
            return self._make_check()

    def _begin(self, force: bool) -> _Snapshot | None:
        """Under the store lock: decide whether to compact and take the context to compact."""
        with self._store.locked():
            self._refresh()
            return self._decide(force)

    def _decide(self, force: bool) -> _Snapshot | None:
        """(Under the lock, after a refresh.) :meth:`_begin`'s decision."""
        check = self._make_check()
        self.last_check = check
        must = self._must_answer(check)
        if not self._msgs and not must:
            return None
        due = force or check.should_compact or must
        if not due and check.micro_due:
            # Micro-compaction clears old tool output once it frees clear_at_least_tokens:
            # try again only after the context grew by that much since the last try.
            step = max(1, self._compactor.config.clear_at_least_tokens)
            if self._micro_at is None or check.current_tokens >= self._micro_at + step:
                self._micro_at = check.current_tokens
                due = True
        if not due:
            return None
        return self._snapshot()

    def _wait(self) -> float:
        return self._store.timeout + 2 * float(self._compactor.config.summarizer_timeout_s)

    def prepare(self, *, force: bool = False, instructions: str | None = None) -> CompactResult | None:
        """Check the context and compact it when needed (the summarizer called synchronously).

        Compacts when the context reaches the soft threshold (or with ``force=True``, the
        ``/compact`` command), and tries micro-compaction above ``micro_trigger_ratio`` each time
        the context grew by ``clear_at_least_tokens``. The outcome is saved in one transaction.
        The check costs O(1): counts are kept up to date on each append.

        With ``background=True`` the summary never runs here: from the soft threshold a job
        summarises a snapshot in a thread and a later call applies it with the messages appended
        meanwhile kept verbatim; at the hard threshold old tool output is cleared or the rule
        summary applies now (:mod:`context_compactor._background`). ``force=True`` cancels a
        running job and compacts now, waiting for the summary.

        Args:
            force: Compact even below the thresholds.
            instructions: Extra instructions for the summary.

        Returns:
            The :class:`CompactResult` whenever the context changed (a compaction or repairs) or
            is still at or over the hard threshold (or the budget), even when nothing could be done: then
            ``strategy == "none"`` and ``reason`` says why. When the context does not fit the
            window (over the budget, ``max_context_tokens - reserve``) the result has
            ``over_budget=True`` and ``over_budget_reason``: do not send it as it is. Its
            ``record`` names row ids; its ``messages`` is the compacted context without messages
            appended meanwhile. ``None`` only when nothing was done and the context is under the
            hard threshold and the budget (:attr:`last_check` tells where it stands).

        Raises:
            StoreError: The store could not be written, or another ``prepare()`` of this Session
                ran too long.
            SummarizerError: As :meth:`ContextCompactor.compact`.

        Example:
            >>> result = session.prepare()
            >>> if result is not None and result.over_budget:
            ...     raise RuntimeError(result.over_budget_reason)      # it would not fit the window
            >>> if result is not None:
            ...     print(result.strategy, result.tokens_before, "->", result.tokens_after)
        """
        self._check_open()
        if not self._compacting.acquire(timeout=self._wait()):
            raise StoreError("another prepare() of this Session ran too long")
        try:
            if force:
                self._cancel_job()
            if not self._compactor.config.background or force:
                return self._foreground(self._compactor, force, instructions)
            steps = self._background_steps(instructions)
            value: Any = None
            while True:
                try:
                    kind, arg = steps.send(value)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                value = None
                if kind == "hook":
                    fn, payload = arg
                    call_hook_sync(fn, payload, "await session.aprepare()")
                elif kind == "now":
                    value = self._foreground(self._rule_compactor(), False, instructions)
                elif kind == "run":
                    arg.run()
                else:
                    arg.start_thread()
        finally:
            self._compacting.release()

    def _foreground(self, compactor: ContextCompactor, force: bool, instructions: str | None) -> CompactResult | None:
        for _ in range(_ATTEMPTS):
            snap = self._begin(force)
            if snap is None:
                return None
            result = compactor.compact(
                snap.messages,
                system=snap.system,
                tools=self._tools,
                format=self._fmt,
                force=force,
                instructions=instructions,
                state=self._state,
            )
            done = self._settle(snap, result)
            if not isinstance(done, _Retry):
                return done
        raise StoreError(f"other connections compacted this session first {_ATTEMPTS} times in a row")

    @property
    def pending(self) -> Job | None:
        """The background job running or waiting to be applied (``background=True``), else ``None``."""
        return self._job

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the Session is closed")

    def _settle(self, snap: _Snapshot, result: CompactResult) -> CompactResult | _Retry | None:
        """What :meth:`prepare` returns for one compaction attempt (see its Returns).

        A context over the budget is an invalid request (DESIGN invariant 5): whatever the
        planner said, the result says ``over_budget`` then, and the record saves it so. After
        another connection's compaction won the race, try again only when the context it left is
        still over the hard threshold or the budget (``None`` is never the answer there)."""
        saved = self._commit(snap, self._budgeted(result))
        with self._store.locked():
            self._refresh()
            must = self._must_answer(self._make_check())
        return self._settled(saved, must)

    def _budgeted(self, result: CompactResult) -> CompactResult:
        cfg = self._compactor.config
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
    def _settled(saved: CompactResult | None, must: bool) -> CompactResult | _Retry | None:
        if saved is None:
            return _RETRY if must else None
        return saved if saved.changed or must else None

    def _must_answer(self, check: CompactionCheck) -> bool:
        """At or over the hard threshold, or over the budget (a ``hard_threshold_tokens`` may sit
        above it): :meth:`prepare` must not answer ``None`` here."""
        return check.urgency == "hard" or check.current_tokens > check.budget

    def _commit(self, snap: _Snapshot, result: CompactResult) -> CompactResult | None:
        """Save a compaction (one transaction) and make its output the context; a result that
        changed nothing is returned unsaved. ``None`` when another connection compacted first."""
        if not (result.compacted or result.repairs):
            return result
        new, msgs, record, system_changed = self._compaction(snap, result)
        with self._store.locked():
            saved = self._store.save_compaction(self._id, new)
            if saved is None:
                self._lost_race()
                self._refresh()
                return None
            self._install(snap, saved, msgs, result, system_changed)
        return replace(result, record=record)

    def _lost_race(self) -> None:
        log.warning("session %s: another connection compacted it meanwhile; this compaction is dropped", self._id)

    def _compaction(self, snap: _Snapshot, result: CompactResult) -> tuple[NewCompaction, list[Any], Any, bool]:
        """What :meth:`_commit` saves: the compaction, its context's messages, its record by row
        id, and whether it changed the system prompt."""
        rows = snap.rows
        record = tuple(replace(e, index=rows[e.index]) for e in result.record if 0 <= e.index < len(rows))
        entries = _derive(snap, result)
        system_changed = result.system is not snap.system and result.system != snap.system
        details = {
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

    def _install(
        self, snap: _Snapshot, saved: Saved, msgs: list[Any], result: CompactResult, system_changed: bool
    ) -> None:
        """(Under the lock.) Make a saved compaction's output the in-memory context, followed by
        the messages appended since its snapshot (the delta rule)."""
        new_rows = list(saved.rows)
        # Messages appended while the summarizer ran follow the new context (the delta rule).
        n = len(snap.messages)
        if self._head != snap.head or self._rows[:n] != snap.rows:
            # Out of step (an async store call's result applied late): read it all next time.
            self._reload, self._marker = True, None
            return
        tail_rows, tail_msgs, tail_tok = self._rows[n:], self._msgs[n:], self._tok[n:]
        known = dict(zip(snap.rows, snap.tokens, strict=True))
        fresh = [i for i, rid in enumerate(new_rows) if rid not in known]
        counts = self._compactor.counter.count_each([msgs[i] for i in fresh], format=self._fmt).messages
        known.update((new_rows[i], c) for i, c in zip(fresh, counts, strict=True))
        self._rows = new_rows + tail_rows
        self._msgs = msgs + tail_msgs
        self._tok = [known[r] for r in new_rows] + tail_tok
        self._raw = sum(self._tok)
        self._head, self._upto = saved.id, snap.upto_seq
        self._head_system = result.system if system_changed else None
        if system_changed:
            self._extra = self._compactor.counter.count_each(
                [], system=self.system, tools=self._tools, format=self._fmt
            ).total
        self._micro_at = None
        # Other connections may have appended since our last look: read them on the next call.
        self._marker = None

    # -- usage ---------------------------------------------------------------------------------------------------

    def record_usage(self, usage: Any, model: str | None = None) -> bool:
        """Learn from the provider's usage report of the last call (calibrates the token counts).

        The report is matched with the context :meth:`context` returned last (what was sent) and
        fed to :meth:`ConversationState.observe_usage`. Reports measured on a context that a
        compaction has replaced since are stale and ignored. Every report is saved with ``model``;
        reopening the session re-learns the calibration from the latest ones.

        Args:
            usage: ``response.usage`` (OpenAI or Anthropic SDK object or dict) or the prompt size
                as an int.
            model: The model that answered (saved with the report).

        Returns:
            Whether the report was learned from.

        Example:
            >>> response = client.chat.completions.create(model="gpt-4o", messages=session.context())
            >>> session.record_usage(response.usage, model="gpt-4o")
            True
        """
        with self._store.locked():
            self._refresh()
            sent = self._sent if self._sent is not None else (list(self._msgs), self._head)
        report = self._usage_report(usage, model, sent)
        self._store.add_usage(self._id, **report)
        return bool(report["learned"])

    def _usage_report(self, usage: Any, model: str | None, sent: tuple[list[Any], int | None]) -> dict[str, Any]:
        """Learn from a usage report measured on ``sent`` (the context and its head) unless a
        compaction replaced it since; the arguments of the store's ``add_usage``."""
        msgs, head = sent
        system, fmt = self.system, self._fmt
        learned = False
        if head == self._head:
            self._compactor.counter.count_each(msgs, system=system, tools=self._tools, format=fmt, state=self._state)
            learned = bool(
                self._state.observe_usage(usage, messages=msgs, system=system, tools=self._tools, format=fmt)
            )
        return {
            "model": model,
            "prompt_tokens": _usage_tokens(usage),
            "usage": _usage_json(usage),
            "head": head,
            "context_len": len(msgs),
            "learned": learned,
        }

    # -- closing -----------------------------------------------------------------------------------------------------

    def pop(self) -> dict[str, Any] | None:
        """Remove the newest message, if no compaction has taken it, and return it.

        For agents that take a turn back (the OpenAI Agents SDK's ``pop_item``). Waits for a
        running :meth:`prepare` of this Session first; another process's compaction computed on
        a snapshot that held the message is refused by the store's head check only if it lands
        later, so pop only what your own process appended.

        Returns:
            The message (as :meth:`context` returns it), or ``None`` when the session is empty.

        Raises:
            StoreError: The newest message was compacted (summarised or edited): it is no
                longer in the context as it was appended.
        """
        if not self._compacting.acquire(timeout=self._wait()):
            raise StoreError("a prepare() of this Session ran too long")
        try:
            with self._store.locked():
                popped = self._store.pop_original(self._id)
                self._marker = None
                self._take(self._store.load_context(self._id))
            return None if popped is None else json.loads(popped[1])
        finally:
            self._compacting.release()

    def clear(self) -> None:
        """Delete every message and compaction of this session and start it again, empty, with the
        same system prompt, tools and format."""
        if not self._compacting.acquire(timeout=self._wait()):
            raise StoreError("a prepare() of this Session ran too long")
        try:
            with self._store.locked():
                system, tools = self._system, self._tools
                self._store.delete_session(self._id)
                info = self._store.open_session(
                    self._id,
                    system=None if system is None else _stored_json(system, "system"),
                    tools=None if tools is None else _stored_json(tools, "tools"),
                    format=None if self._format == "responses" else self._format,
                )
                self._marker = None
                self._take(info.context)
        finally:
            self._compacting.release()

    def close(self) -> None:
        """Cancel a background job (its result is dropped; nothing is written after this) and
        close the store if this Session opened it (a :class:`SessionStore` you passed stays open)."""
        self._closed = True
        job, self._job = self._job, None
        if job is not None:
            job.cancel()
            job.join(1.0)
        if self._own_store:
            self._store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Session({self._id!r}, store={getattr(self._store, 'path', self._store)!r}, messages={self._last_seq}, "
            f"context={len(self._msgs)}, compactions={'none' if self._head is None else 'head ' + str(self._head)})"
        )


def _derive(snap: _Snapshot, result: CompactResult) -> list[tuple[int | None, dict[str, Any], str, int | None]]:
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
