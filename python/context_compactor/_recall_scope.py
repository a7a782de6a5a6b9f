"""Whether a compaction runs for a :class:`Session` (which stores the originals ``recall=True``
names): a context variable the session sets around its calls into the compactor. Its own module
so the compactor and the session both import it without importing each other."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from context_compactor.errors import ConfigError

_IN_SESSION: ContextVar[bool] = ContextVar("context_compactor_in_session", default=False)


@contextlib.contextmanager
def session_scope() -> Iterator[None]:
    """Mark the calls inside as a session's (its store keeps the originals)."""
    token = _IN_SESSION.set(True)
    try:
        yield
    finally:
        _IN_SESSION.reset(token)


def check_recall(recall: bool, offload_dir: str | None) -> None:
    """``ConfigError`` when ``recall=True`` has nowhere to keep the originals."""
    if recall and offload_dir is None and not _IN_SESSION.get():
        raise ConfigError(
            "recall: recall=True needs a Session (its store keeps the originals) or offload_dir "
            "(the originals are written there); this call has neither",
            "recall",
        )
