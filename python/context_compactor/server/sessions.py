"""Sessions over the stores: ``/v1/sessions…`` (seed 003's database design, served).

One :class:`SessionStore` for the server (``--store``: a SQLite path, ``:memory:`` or a
``postgresql://`` URL); a :class:`Session` object per id, opened on first use and shared by the
requests on it (Sessions are thread-safe). Every append is committed before its ids are
returned, so an acknowledged message survives a ``kill -9`` of the server.

What a session was created with is in the store, so a restarted server reopens it as it was: the
system prompt and tools (the store's own columns), and the format, ``config`` and summarizer name
(the session's meta, :meth:`SessionStore.session_meta`: JSON the store does not read).
``--retention`` deletes sessions idle for longer than it (their originals and compactions with
them).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from context_compactor._store import SessionStore
from context_compactor.compactor import ContextCompactor
from context_compactor.errors import StoreError
from context_compactor.server.compaction import REMOVED, Compactors, check_json, result_json
from context_compactor.server.schemas import (
    AppendRequest,
    AppendResponse,
    CompactionsResponse,
    CreateSession,
    MessagesResponse,
    PrepareRequest,
    PrepareResponse,
    SessionInfoResponse,
    SessionList,
    ViewResponse,
)
from context_compactor.session import Session

__all__ = ["NotFound", "Sessions", "router"]

log = logging.getLogger("context_compactor.server")

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

_SWEEP_EVERY_S = 60.0


class NotFound(Exception):
    """No such session or compaction (404)."""


class Sessions:
    """The server's sessions: one store, open :class:`Session` objects by id."""

    def __init__(self, store: str, compactors: Compactors, retention_s: float | None = None) -> None:
        # SessionStore(url) picks the backend (SQLite path or postgresql://) in __new__.
        opener: Any = SessionStore
        self.store: SessionStore = opener(store)
        self.compactors = compactors
        self.retention_s = retention_s
        self._open: dict[str, Session] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()
        self._started = self._swept = time.time()

    def meta(self, sid: str) -> dict[str, Any]:
        """What the session was created with: ``format``, ``config`` and ``summarizer`` (each
        ``None`` when not given), from the store."""
        with self._lock:
            cached = self._meta.get(sid)
        if cached is not None:
            return cached
        text = self.store.session_meta(sid)
        meta = {"format": None, "config": None, "summarizer": None, **(json.loads(text) if text else {})}
        with self._lock:
            self._meta[sid] = meta
        return meta

    def _compactor(self, meta: dict[str, Any]) -> ContextCompactor:
        return self.compactors.get(meta["config"], meta["summarizer"])

    def create(self, body: CreateSession) -> Session:
        compactor = self.compactors.get(body.config, body.summarizer)  # refuses a bad config or name first
        sid = body.session_id or uuid.uuid4().hex
        with self._lock:
            old = self._open.pop(sid, None)
        if old is not None:
            old.close()
        session = Session(
            sid, compactor=compactor, store=self.store, system=body.system, tools=body.tools, format=body.format
        )
        meta = {"format": body.format, "config": body.config, "summarizer": body.summarizer}
        self.store.set_session_meta(sid, json.dumps(meta, ensure_ascii=False))
        with self._lock:
            self._open[sid] = session
            self._meta[sid] = meta
            self._touched[sid] = time.time()
        return session

    def get(self, sid: str) -> Session:
        self.sweep()
        with self._lock:
            session = self._open.get(sid)
            if session is not None:
                self._touched[sid] = time.time()
                return session
        if sid not in self.store.session_ids():
            raise NotFound(f"no session {sid!r}")
        meta = self.meta(sid)
        session = Session(sid, compactor=self._compactor(meta), store=self.store, format=meta["format"])
        with self._lock:
            session = self._open.setdefault(sid, session)
            self._touched[sid] = time.time()
        return session

    def ids(self) -> list[str]:
        return self.store.session_ids()

    def delete(self, sid: str) -> bool:
        with self._lock:
            session = self._open.pop(sid, None)
            self._meta.pop(sid, None)
            self._touched.pop(sid, None)
        if session is not None:
            session.close()
        return self.store.delete_session(sid)

    def sweep(self) -> None:
        """Delete sessions idle for longer than the retention (at most once a minute)."""
        now = time.time()
        if self.retention_s is None or now - self._swept < min(_SWEEP_EVERY_S, self.retention_s):
            return
        self._swept = now
        for sid in self.store.session_ids():
            if now - self._touched.get(sid, self._started) > self.retention_s:
                self.delete(sid)
                log.info("retention: deleted an idle session")

    def close(self) -> None:
        with self._lock:
            sessions, self._open = list(self._open.values()), {}
        for s in sessions:
            s.close()
        self.store.close()


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


def _text(message: dict[str, Any]) -> str:
    """The readable text of a message (content string or its text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _info(reg: Sessions, session: Session) -> dict[str, Any]:
    meta = reg.meta(session.id)
    return {
        "session_id": session.id,
        "format": session.format,
        "config": meta["config"],
        "summarizer": meta["summarizer"],
        "message_count": len(session),
        "compactions": len(session.compactions()),
        "check": check_json(session.check()),
    }


@router.post("", status_code=201, response_model=SessionInfoResponse, summary="Create (or reopen) a session")
def create(body: CreateSession, request: Request) -> Any:
    reg = _sessions(request)
    return JSONResponse(_info(reg, reg.create(body)), status_code=201)


@router.get("", response_model=SessionList, summary="Every session, with its context indicator")
def list_sessions(request: Request) -> Any:
    reg = _sessions(request)
    out = []
    for sid in reg.ids():
        try:
            out.append(_info(reg, reg.get(sid)))
        except (NotFound, StoreError):  # deleted meanwhile
            continue
    return JSONResponse({"sessions": out})


@router.get("/{session_id}", response_model=SessionInfoResponse, summary="A session's state")
def info(session_id: str, request: Request) -> Any:
    reg = _sessions(request)
    return JSONResponse(_info(reg, reg.get(session_id)))


@router.delete("/{session_id}", status_code=204, summary="Delete a session and everything it holds")
def delete(session_id: str, request: Request) -> Response:
    if not _sessions(request).delete(session_id):
        raise NotFound(f"no session {session_id!r}")
    return Response(status_code=204)


@router.post("/{session_id}/messages", response_model=AppendResponse, summary="Append messages (committed on return)")
def append(session_id: str, body: AppendRequest, request: Request) -> Any:
    ids = _sessions(request).get(session_id).extend(body.messages)
    return JSONResponse({"ids": ids})


@router.post("/{session_id}/prepare", response_model=PrepareResponse, summary="Compact when due (or with force)")
def prepare(session_id: str, body: PrepareRequest, request: Request) -> Any:
    session = _sessions(request).get(session_id)
    result = session.prepare(force=body.force, instructions=body.instructions)
    out = None
    if result is not None:
        out = result_json(result, [], None, session.format, out_ids=session.context_ids())
    return JSONResponse(
        {
            "compacted": bool(result is not None and result.compacted),
            "result": out,
            "check": check_json(session.check()),
        }
    )


@router.get("/{session_id}/context", response_model=MessagesResponse, summary="What to send the model now")
def context(session_id: str, request: Request) -> Any:
    session = _sessions(request).get(session_id)
    return JSONResponse(
        {"messages": session.context(), "ids": session.context_ids(), "system": session.system, "tools": session.tools}
    )


@router.get("/{session_id}/history", response_model=MessagesResponse, summary="Every original message")
def history(session_id: str, request: Request) -> Any:
    session = _sessions(request).get(session_id)
    return JSONResponse(
        {"messages": session.history(), "ids": session.history_ids(), "system": session.system, "tools": session.tools}
    )


@router.get("/{session_id}/compactions", response_model=CompactionsResponse, summary="The session's compactions")
def compactions(session_id: str, request: Request) -> Any:
    out = []
    for c in _sessions(request).get(session_id).compactions():
        removed = [e.index for e in c.record if e.action in REMOVED]
        out.append(
            {
                "id": c.id,
                "created_at": c.created_at,
                "strategy": c.strategy,
                "summary": c.summary,
                "tokens_before": c.tokens_before,
                "tokens_after": c.tokens_after,
                "summary_of": removed,
                "edited": [e.index for e in c.record if e.action not in REMOVED],
                "over_budget": c.over_budget,
                "fallback_reason": c.fallback_reason,
            }
        )
    return JSONResponse({"compactions": out})


@router.get(
    "/{session_id}/compactions/{compaction_id}/originals",
    response_model=MessagesResponse,
    summary="The original messages a compaction replaced",
)
def originals(session_id: str, compaction_id: int, request: Request) -> Any:
    try:
        messages = _sessions(request).get(session_id).expand(compaction_id)
    except KeyError:
        raise NotFound(f"no compaction {compaction_id} in session {session_id!r}") from None
    return JSONResponse({"messages": messages, "ids": []})


@router.get("/{session_id}/view", response_model=ViewResponse, summary="The conversation as the page shows it")
def view(session_id: str, request: Request) -> Any:
    session = _sessions(request).get(session_id)
    records = session.compactions()
    originals = set(session.history_ids())
    items: list[dict[str, Any]] = []
    for row, message in zip(session.context_ids(), session.context(), strict=True):
        card = None
        if row not in originals:  # a derived row: a summary (a card) or an edited copy (a message)
            text = _text(message)
            card = next((c for c in reversed(records) if c.summary and c.summary[:200] in text), None)
        if card is None:
            items.append({"kind": "message", "id": row, "message": message})
        else:
            count = len(session.expand(card.id))
            items.append({"kind": "card", "id": row, "compaction_id": card.id, "count": count, "summary": card.summary})
    return JSONResponse({"session_id": session.id, "items": items, "check": check_json(session.check())})
