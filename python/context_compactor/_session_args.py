"""The argument order of :class:`~context_compactor.session.Session` and the Agents SDK's
:class:`~context_compactor.integrations.agents.CompactingSession`: ``session_id`` first (as the
Agents SDK's ``SQLiteSession(session_id, ...)``), ``compactor=`` and ``store=`` by keyword.

The old positional forms, ``Session(compactor, store, session_id)`` and
``CompactingSession(session_id, compactor, store)``, still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings
from typing import Any

from context_compactor.compactor import ContextCompactor

__all__ = ["compacting_session_arguments", "session_arguments"]

_UNSET: Any = object()


def session_arguments(
    args: tuple[Any, ...], session_id: Any, compactor: Any, store: Any, *, name: str = "Session"
) -> tuple[Any, Any, Any]:
    """``(session_id, compactor, store)`` of ``Session(*args, session_id=, compactor=, store=)``
    (and of ``Session.aopen``): ``args`` is ``(session_id,)`` or the deprecated
    ``(compactor, store[, session_id])``."""
    if not args:
        return session_id, compactor, store
    if isinstance(args[0], ContextCompactor):
        if len(args) > 3 or compactor is not None or store is not None or (len(args) == 3 and session_id is not None):
            raise TypeError(f"{name}() got the compactor or the store twice")
        warnings.warn(
            f"{name}(compactor, store, session_id) is deprecated: use {name}(session_id, compactor=..., store=...)",
            DeprecationWarning,
            stacklevel=3,
        )
        return (args[2] if len(args) == 3 else session_id), args[0], (args[1] if len(args) > 1 else None)
    if len(args) > 1:
        raise TypeError(
            f"{name}() takes the session_id as its only positional argument (compactor=, store= by keyword)"
        )
    if session_id is not None:
        raise TypeError(f"{name}() got session_id twice")
    return args[0], compactor, store


def compacting_session_arguments(legacy: tuple[Any, ...], compactor: Any, store: Any) -> tuple[Any, Any]:
    """``(compactor, store)`` of ``CompactingSession(session_id, *legacy, compactor=, store=)``:
    ``legacy`` is the deprecated positional ``(compactor[, store])``."""
    if not legacy:
        return compactor, store
    if len(legacy) > 2 or compactor is not None:
        raise TypeError("CompactingSession() got the compactor or the store twice")
    warnings.warn(
        "CompactingSession(session_id, compactor, store) is deprecated: "
        "use CompactingSession(session_id, compactor=..., store=...)",
        DeprecationWarning,
        stacklevel=3,
    )
    return legacy[0], (legacy[1] if len(legacy) > 1 else store)
