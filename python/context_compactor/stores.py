"""What a store author needs: the store interfaces, the data types they take and return, and
the registration of a URL scheme.

A :class:`~context_compactor.session.Session` keeps its conversation in a :class:`SessionStore`:
a database of any number of sessions behind named operations (``open_session``,
``load_context``, ``append_rows``, ``save_compaction``, ...). Two ship with the package: SQLite
(a path or ``":memory:"``, the embedded default) and PostgreSQL (``postgresql://`` URLs, extra
``[postgres]``). Both run the same operation code over a small SQL dialect layer; a new store
implements the operations of :class:`SessionStore` with the guarantees its docstring lists and,
optionally, registers its URL scheme:

A new store subclasses :class:`SessionStore` (its constructor takes the URL and ``timeout=``
and calls ``super().__init__(timeout=timeout)``) and implements the abstract operations.

Example:
    >>> from context_compactor.stores import SessionStore, register_backend
    >>> register_backend("mydb", "my_package.store:MyStore")   # SessionStore("mydb://...") opens it
    >>> store = SessionStore(":memory:")
    >>> store.open_session("a", system=None, tools=None, format=None).context.rows
    ()
    >>> store.close()

What crosses the interface:

- :class:`SessionInfo` (``open_session``), :class:`StoredContext` (``load_context``),
  :class:`Appended` (``append_rows``), :class:`NewCompaction` / :class:`Saved`
  (``save_compaction``), :class:`StoredCompaction` (``compactions``). Messages are
  ``(role, JSON text)``.
- :func:`stored_compactions` and :func:`expand_walk` / :func:`walk`: ``compactions()`` and
  ``expand()`` written once for every store (a store only fetches the rows they ask for).
- :class:`AsyncSessionStore`: the same operations awaited, for a store with a native async
  driver (:meth:`SessionStore.aio`); :func:`finish` runs an operation to its end when its
  caller is cancelled.
- :data:`REMOVED`: the record actions after which a row is no longer in the context.

The delta rule and the guarantees every store keeps are in the design note of
:mod:`context_compactor._store`; ``docs/stores.md`` walks through writing one.
"""

from __future__ import annotations

from context_compactor._store import (
    REMOVED,
    Appended,
    AsyncSessionStore,
    NewCompaction,
    Saved,
    SessionInfo,
    SessionStore,
    StoredCompaction,
    StoredContext,
    expand_walk,
    finish,
    register_backend,
    stored_compactions,
    walk,
)
from context_compactor.errors import StoreError

__all__ = [
    "REMOVED",
    "Appended",
    "AsyncSessionStore",
    "NewCompaction",
    "Saved",
    "SessionInfo",
    "SessionStore",
    "StoreError",
    "StoredCompaction",
    "StoredContext",
    "expand_walk",
    "finish",
    "register_backend",
    "stored_compactions",
    "walk",
]
