"""context-compactor: keep long LLM-agent conversations inside the context window.

A Rust core (token accounting, validation, planning) behind a small Python shell. See the
README for the two commands and a ten-line example.
"""

from __future__ import annotations

from context_compactor._core import (
    ConversationStructure,
    Problem,
    __version__,
    analyze_conversation,
    count_tokens,
    count_tokens_many,
    detect_format,
    estimate_tokens,
    validate_messages,
)
from context_compactor.errors import (
    CompactorError,
    ConfigError,
    InvalidConversationError,
    MessageTypeError,
    StoreError,
    SummarizerError,
)

__all__ = [
    "CompactorError",
    "ConfigError",
    "ConversationStructure",
    "InvalidConversationError",
    "MessageTypeError",
    "Problem",
    "StoreError",
    "SummarizerError",
    "__version__",
    "analyze_conversation",
    "count_tokens",
    "count_tokens_many",
    "detect_format",
    "estimate_tokens",
    "validate_messages",
]
