"""The JSON API's request and response bodies (pydantic models: FastAPI validates requests with
them and writes ``/openapi.json`` from them; the committed copy is ``docs/openapi.json``).

Messages are objects in any of the library's wire formats (OpenAI Chat Completions, Anthropic
Messages, Responses items), left as they are; ``ids`` are the host's own message ids (strings or
integers), returned in ``summary_of`` for the messages a summary replaced (seed 003's contract).
Requests name a summarizer allow-listed at start, never a URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from context_compactor import _core

__all__ = [
    "AppendRequest",
    "AppendResponse",
    "CheckResponse",
    "CompactRequest",
    "CompactResponse",
    "CompactionInfo",
    "CompactionsResponse",
    "CountRequest",
    "CountResponse",
    "CreateSession",
    "HostId",
    "MessagesResponse",
    "PrepareRequest",
    "PrepareResponse",
    "RecordItem",
    "SessionInfoResponse",
    "SessionList",
    "ViewItem",
    "ViewResponse",
]

HostId = str | int
if TYPE_CHECKING:
    from context_compactor._core import _Format as Format
else:
    # Every format the core reads, from its one list (the schema's enum).
    Format = Literal[_core.FORMATS]
System = str | list[dict[str, Any]] | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CountRequest(_Strict):
    """A request to count: messages, optional system and tools."""

    messages: list[dict[str, Any]]
    system: System = None
    tools: list[dict[str, Any]] | None = None
    format: Format | None = None
    config: dict[str, Any] | None = Field(None, description="CompactionConfig fields (tokenizer, overheads, window)")


class CountResponse(BaseModel):
    tokens: int
    format: str
    message_count: int


class CheckResponse(BaseModel):
    """``ContextCompactor.check()``: where the request stands against its window."""

    should_compact: bool
    urgency: Literal["none", "soft", "hard"]
    current_tokens: int
    threshold: int
    hard_threshold: int
    budget: int
    target_tokens: int
    usage_ratio: float = Field(description="current_tokens / budget (the context indicator: 0.7 orange, 0.9 red)")
    message_count: int
    format: str


class CompactRequest(CountRequest):
    """A compaction request. ``ids`` (optional) is parallel to ``messages``."""

    ids: list[HostId] | None = Field(None, description="the host's id of each message, parallel to messages")
    force: bool = Field(False, description="compact even below the thresholds (the /compact command)")
    instructions: str | None = Field(None, description="extra instructions for the summary")
    summarizer: str | None = Field(
        None, description="the name of a summarizer endpoint allow-listed at start; the rule summary when omitted"
    )


class RecordItem(BaseModel):
    """What happened to one input message."""

    index: int = Field(description="index in the request's messages (a row id in a session)")
    id: HostId | None = Field(description="the host's id of that message (from ids), if given")
    action: str
    detail: str = ""


class CompactResponse(BaseModel):
    """The compacted request and what was done."""

    messages: list[dict[str, Any]]
    ids: list[HostId | None] = Field(
        description="per output message: the host id of a kept original, null for new ones"
    )
    system: Any = None
    summary: str | None
    summary_of: list[HostId] = Field(description="host ids (row ids in a session) of the messages the summary replaced")
    compacted: bool
    strategy: str
    summary_source: str | None
    fallback_reason: str | None
    tokens_before: int
    tokens_after: int
    over_budget: bool
    over_budget_reason: str | None
    must_keep_missing: list[str]
    record: list[RecordItem]
    format: str


class CreateSession(_Strict):
    session_id: str | None = Field(None, max_length=200, description="a new random id when omitted")
    format: Format | None = None
    system: System = None
    tools: list[dict[str, Any]] | None = None
    config: dict[str, Any] | None = None
    summarizer: str | None = Field(None, description="an allow-listed summarizer name")


class SessionInfoResponse(BaseModel):
    session_id: str
    format: str
    config: dict[str, Any] | None = Field(None, description="the config the session was created with")
    summarizer: str | None = Field(None, description="the summarizer name the session was created with")
    message_count: int
    compactions: int
    check: CheckResponse


class SessionList(BaseModel):
    sessions: list[SessionInfoResponse]


class AppendRequest(_Strict):
    messages: list[dict[str, Any]] = Field(min_length=1)


class AppendResponse(BaseModel):
    ids: list[int] = Field(description="the row ids of the appended messages")


class PrepareRequest(_Strict):
    force: bool = False
    instructions: str | None = None


class PrepareResponse(BaseModel):
    compacted: bool
    result: CompactResponse | None
    check: CheckResponse


class MessagesResponse(BaseModel):
    messages: list[dict[str, Any]]
    ids: list[int]
    system: Any = None
    tools: list[dict[str, Any]] | None = None


class CompactionInfo(BaseModel):
    id: int
    created_at: float
    strategy: str
    summary: str | None
    tokens_before: int
    tokens_after: int
    summary_of: list[int] = Field(description="row ids the summary replaced")
    edited: list[int] = Field(description="row ids edited in place (cleared tool output, cut arguments)")
    over_budget: bool
    fallback_reason: str | None


class CompactionsResponse(BaseModel):
    compactions: list[CompactionInfo]


class ViewItem(BaseModel):
    """One entry of the page's view: a message, or a card standing for the messages a compaction replaced."""

    kind: Literal["message", "card"]
    id: int
    message: dict[str, Any] | None = None
    compaction_id: int | None = None
    count: int = 0
    summary: str | None = None


class ViewResponse(BaseModel):
    session_id: str
    items: list[ViewItem]
    check: CheckResponse
