"""The stateless compaction API: ``POST /v1/count``, ``/v1/check``, ``/v1/compact``.

Handlers are plain ``def``: FastAPI runs them in its worker threads, and the core releases the
GIL while it counts and plans, so requests on other connections keep moving. Results are written
with :class:`JSONResponse` directly (the response models document them in ``/openapi.json``;
validating a large compacted conversation a second time on the way out would only cost time).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from context_compactor.server.compaction import Compactors, RequestRefused, check_json, result_json
from context_compactor.server.schemas import (
    CheckResponse,
    CompactRequest,
    CompactResponse,
    CountRequest,
    CountResponse,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["compaction"])


def _compactors(request: Request) -> Compactors:
    compactors: Compactors = request.app.state.compactors
    return compactors


def _format(messages: list[dict[str, Any]], given: str | None) -> str:
    from context_compactor import detect_format

    return given or str(detect_format(messages))


@router.post("/count", response_model=CountResponse, summary="Count a request's tokens")
def count(body: CountRequest, request: Request) -> Any:
    compactor = _compactors(request).get(body.config)
    fmt = _format(body.messages, body.format)
    tokens = compactor.counter.count_messages(body.messages, system=body.system, tools=body.tools, format=fmt)
    return JSONResponse({"tokens": tokens, "format": fmt, "message_count": len(body.messages)})


@router.post("/check", response_model=CheckResponse, summary="Where a request stands against its window")
def check(body: CountRequest, request: Request) -> Any:
    compactor = _compactors(request).get(body.config)
    result = compactor.check(body.messages, system=body.system, tools=body.tools, format=body.format)
    return JSONResponse(check_json(result))


@router.post(
    "/compact",
    response_model=CompactResponse,
    summary="Compact a conversation (when due, or always with force)",
    description=(
        "Returns the messages to send from now on, the summary, and `summary_of`: the host ids "
        "(from `ids`) of the messages the summary replaced, to mark as compressed."
    ),
)
def compact(body: CompactRequest, request: Request) -> Any:
    if body.ids is not None and len(body.ids) != len(body.messages):
        raise RequestRefused(f"ids: {len(body.ids)} ids for {len(body.messages)} messages (they are parallel)")
    compactor = _compactors(request).get(body.config, body.summarizer)
    fmt = _format(body.messages, body.format)
    result = compactor.compact(
        body.messages,
        system=body.system,
        tools=body.tools,
        format=fmt,
        force=body.force,
        instructions=body.instructions,
    )
    return JSONResponse(result_json(result, body.messages, body.ids, fmt))
