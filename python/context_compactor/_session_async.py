"""The async methods of :class:`~context_compactor.session.Session`: ``await Session.aopen(...)``,
``aappend``, ``aextend``, ``acontext``, ``ahistory``, ``acheck``, ``acompactions``, ``aexpand``,
``arecord_usage``, ``aclose`` (and ``aprepare``, in :mod:`context_compactor.session`, whose store
calls go through :func:`off_loop` too).

Design note (what was built and why). Every store call of these methods runs in a worker thread
(:func:`asyncio.to_thread`) on the Session's own store connection, never on the event loop; the
async summarizer and the async hooks still run on the loop. This is the alternative to a second,
native store on psycopg's ``AsyncConnection``, chosen because it keeps one implementation of the
store operations for both paths: the same SQL, the same transactions (one per append and per
compaction, the session's row lock), the same delta rule and the same schema versioning, for
PostgreSQL and SQLite alike (SQLite's calls block too: a ``synchronous=FULL`` commit is an fsync).
A native async store would duplicate all of that for a gain that is a thread hop per call
(tens of microseconds, next to a round trip to the server). The Session is already thread-safe
(its store's re-entrant lock serialises the calls), so tasks and threads may share it.

Measured (``benches/bench_store_async.py``: 200 ``append``+``prepare`` against the throwaway
PostgreSQL server, with a ticker task measuring how late the loop wakes it): the figures are in
the README's "Sessions in PostgreSQL" section.

Cancellation: a store call, once started, runs to its end (its transaction commits or rolls
back) before the cancelled task sees :class:`asyncio.CancelledError`, so the Session's
in-memory context never disagrees with the store and no ``prepare()`` overlaps another. A
cancelled ``aappend`` may therefore have committed, as a sync ``append`` whose reply was lost:
the message is in :meth:`history` then, with its row id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self

    from context_compactor.compactor import CompactionCheck

T = TypeVar("T")


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; a cancellation waits for it to finish, then
    propagates."""
    fut = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue
            except BaseException:  # the call's own error: the cancellation wins
                break
        raise


class AsyncMethods:
    """Mixin of :class:`~context_compactor.session.Session`: the async twins of its methods."""

    if TYPE_CHECKING:

        def append(self, message: Any) -> int: ...
        def extend(self, messages: Iterable[Any]) -> list[int]: ...
        def context(self) -> list[dict[str, Any]]: ...
        def history(self) -> list[dict[str, Any]]: ...
        def check(self) -> CompactionCheck: ...
        def compactions(self) -> Sequence[Any]: ...
        def expand(self, record_id: int) -> list[dict[str, Any]]: ...
        def record_usage(self, usage: Any, model: str | None = None) -> bool: ...
        def close(self) -> None: ...

    @classmethod
    async def aopen(cls, *args: Any, **kwargs: Any) -> Self:
        """The constructor for async code: opens (or creates) the session in a worker thread.
        Takes the constructor's arguments.

        Example:
            >>> session = await Session.aopen(compactor, "postgresql://app@db/agents", "ticket-42")  # doctest: +SKIP
        """
        built: list[Any] = []

        def build() -> Any:
            built.append(cls(*args, **kwargs))
            return built[0]

        try:
            session: Self = await off_loop(build)
            return session
        except asyncio.CancelledError:
            for session in built:  # opened after all: a cancelled aopen leaves no connection open
                session.close()
            raise

    async def aappend(self, message: Any) -> int:
        """:meth:`append` with the store call off the event loop. Returns the row id."""
        return await off_loop(self.append, message)

    async def aextend(self, messages: Iterable[Any]) -> list[int]:
        """:meth:`extend` (one transaction) with the store call off the event loop."""
        return await off_loop(self.extend, list(messages))

    async def acontext(self) -> list[dict[str, Any]]:
        """:meth:`context`, read off the event loop (PostgreSQL reads the server each time)."""
        return await off_loop(self.context)

    async def ahistory(self) -> list[dict[str, Any]]:
        """:meth:`history`, read off the event loop."""
        return await off_loop(self.history)

    async def acheck(self) -> CompactionCheck:
        """:meth:`check`, off the event loop."""
        return await off_loop(self.check)

    async def acompactions(self) -> Sequence[Any]:
        """:meth:`compactions`, read off the event loop."""
        return await off_loop(self.compactions)

    async def aexpand(self, record_id: int) -> list[dict[str, Any]]:
        """:meth:`expand`, read off the event loop."""
        return await off_loop(self.expand, record_id)

    async def arecord_usage(self, usage: Any, model: str | None = None) -> bool:
        """:meth:`record_usage`, off the event loop."""
        return await off_loop(self.record_usage, usage, model)

    async def aclose(self) -> None:
        """:meth:`close` off the event loop (it may wait up to 1 s for a background job)."""
        await off_loop(self.close)
