"""context-compactor: keep long LLM-agent conversations inside the context window.

A Rust core (token accounting, validation, planning) behind a small Python shell. See the
README for the two set-up commands and a ten-line example, and docs/ for the guide.
"""

from __future__ import annotations

import logging

from context_compactor._core import (
    SUMMARY_MARKER,
    ConversationState,
    ConversationStructure,
    MessageCounts,
    Problem,
    __version__,
    analyze_conversation,
    count_tokens,
    count_tokens_many,
    detect_format,
    estimate_tokens,
    validate_messages,
)
from context_compactor.compactor import CompactionCheck, ContextCompactor
from context_compactor.config import PRESETS, CompactionConfig, SelectiveRule
from context_compactor.errors import (
    CompactorError,
    ConfigError,
    FormatMismatchError,
    InvalidConversationError,
    MessageTypeError,
    StoreError,
    SummarizerError,
)
from context_compactor.plan import CompactionPlan
from context_compactor.results import (
    CompactionPreview,
    CompactResult,
    RecordEntry,
    SummaryRequest,
    SummaryResponse,
)
from context_compactor.session import CompactionRecord, Session, SessionStore
from context_compactor.tokens import TokenCounter

logging.getLogger("context_compactor").addHandler(logging.NullHandler())

__all__ = [
    "PRESETS",
    "SUMMARY_MARKER",
    "CompactResult",
    "CompactionCheck",
    "CompactionConfig",
    "CompactionPlan",
    "CompactionPreview",
    "CompactionRecord",
    "CompactorError",
    "ConfigError",
    "ContextCompactor",
    "ConversationState",
    "ConversationStructure",
    "FormatMismatchError",
    "InvalidConversationError",
    "MessageCounts",
    "MessageTypeError",
    "Problem",
    "RecordEntry",
    "SelectiveRule",
    "Session",
    "SessionStore",
    "StoreError",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResponse",
    "TokenCounter",
    "__version__",
    "analyze_conversation",
    "count_tokens",
    "count_tokens_many",
    "detect_format",
    "estimate_tokens",
    "validate_messages",
]
