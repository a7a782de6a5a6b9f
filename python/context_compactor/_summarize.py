"""Calling the user's summarizer: timeouts, cancellation, error classes, reply checks.

Design notes:

- ``compact()`` runs a sync summarizer in a *daemon* thread and waits with a deadline; at the
  deadline the thread is abandoned (it cannot be killed) and the fallback ladder runs. A
  ``ThreadPoolExecutor`` would be simpler but its workers are joined at interpreter exit, so a
  hung LLM call would hang the program's exit.
- ``acompact()`` awaits an async summarizer under ``asyncio.wait_for``; a sync one runs in a
  daemon thread whose result is handed back to the loop, so the loop never blocks.
- Cancelling ``acompact()`` propagates ``CancelledError``: the ladder catches ``Exception``, never
  ``BaseException``, and nothing has been applied before the summary is in.
- ``compact()`` never runs an event loop itself (``asyncio.run`` inside a library breaks async SDK
  clients on their second call): an awaitable reply is closed and reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from context_compactor import _core
from context_compactor.errors import SummarizerError
from context_compactor.results import SummaryRequest, SummaryResponse

#: Errors that mean the summarizer's own code is wrong (a bad keyword argument, a missing key):
#: falling back on every compaction would hide them.
PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError, ImportError)


class SummarizerTimeout(TimeoutError):
    """The summarizer did not answer within ``summarizer_timeout_s``."""


class Deadline:
    """``summarizer_timeout_s`` for a whole compaction: every summarizer call of one compaction
    (each chunk of a chunked span) shares it, so a compaction never waits longer than the
    configured time for its summary, however many chunks it has. The clock starts at the first
    call."""

    __slots__ = ("_end", "total")

    def __init__(self, total: float) -> None:
        self.total = total
        self._end: float | None = None

    def left(self) -> float:
        """Seconds left for the next call; :class:`SummarizerTimeout` when none are."""
        now = time.monotonic()
        if self._end is None:
            self._end = now + self.total
        left = self._end - now
        if left <= 0:
            raise SummarizerTimeout(self.message())
        return left

    def message(self) -> str:
        return f"no summary within summarizer_timeout_s={self.total:g} (the whole compaction's summarizer calls)"


class BadReply(Exception):
    """The summarizer's reply cannot be used as a summary (empty, an error text, not a str)."""


def classify(exc: BaseException) -> str:
    """``"transient"``, ``"permanent"`` or ``"unknown"`` for an exception from a summarizer.

    Recognises the ``openai`` and ``anthropic`` SDK exception classes by name (no import
    needed), any ``status_code`` attribute (also on ``exc.response``), timeouts and connection
    errors. The classes, names and statuses are the core's (``src/driver/classify.rs``), shared
    with the Rust API; this reads what only Python can see of the exception.
    """
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return _core.classify_failure(
        transient_type=isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError, BadReply)),
        class_names=[c.__name__ for c in type(exc).__mro__],
        programming=isinstance(exc, PROGRAMMING_ERRORS),
        status=max(-(2**63), min(int(status), 2**63 - 1)) if isinstance(status, int) else None,
    )


def describe(exc: BaseException) -> str:
    """``"ErrorClass: short text"`` for ``fallback_reason``."""
    text = str(exc).strip().replace("\n", " ")
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_reply(reply: Any) -> tuple[str, bool, Any]:
    """The reply's text, truncation flag and usage, or :class:`BadReply`."""
    truncated = False
    usage = None
    if isinstance(reply, SummaryResponse):
        truncated = bool(reply.truncated)
        usage = reply.usage
        reply = reply.text
    if not isinstance(reply, str):
        raise BadReply(f"the summarizer returned {type(reply).__name__}, not str or SummaryResponse")
    problem = _core.reply_problem(reply)  # empty, or an error or refusal (the core's rule)
    if problem is not None:
        raise BadReply(problem)
    return reply, truncated, usage


class Cancelled(Exception):
    """A background job was cancelled while it waited for the summarizer."""


def call_sync(
    summarizer: Callable[[SummaryRequest], Any],
    request: SummaryRequest,
    deadline: Deadline,
    cancel: threading.Event | None = None,
) -> Any:
    """Run a summarizer from ``compact()``: in a daemon thread, abandoned at the compaction's
    ``deadline`` (or when ``cancel`` is set: :class:`Cancelled`)."""
    timeout, late = deadline.left(), deadline.message()
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = summarizer(request)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e
        finally:
            done.set()

    # The caller's context variables go along (as asyncio.to_thread does): a tracing library's
    # current span, so the summarizer's own LLM call is traced under the compaction.
    t = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="context-compactor-summarizer", daemon=True
    )
    t.start()
    end = time.monotonic() + timeout
    # With a cancel event, look at it every 10 ms (it stays set once set; the reply's own event
    # cannot be it: a chunked summary calls the summarizer again with the same cancel event).
    step = None if cancel is None else 0.01
    while not done.is_set():
        if cancel is not None and cancel.is_set():
            raise Cancelled
        left = end - time.monotonic()
        if left <= 0:
            raise SummarizerTimeout(late)
        done.wait(left if step is None else min(left, step))
    if "error" in box:
        raise box["error"]
    value = box["value"]
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if callable(close):
            close()
        raise SummarizerError(
            "the summarizer returned an awaitable: use `await compactor.acompact(...)` "
            "(or `await session.aprepare()`; compact() and prepare() do not run an event loop)"
        )
    return value


def call_hook_sync(fn: Callable[[Any], Any], payload: Any, use: str) -> None:
    """Run an ``on_before_compact``/``on_compacted`` hook from sync code; an awaitable it returns
    is closed and reported (``use`` names the async call to use instead)."""
    r = fn(payload)
    if inspect.isawaitable(r):
        close = getattr(r, "close", None)
        if callable(close):
            close()
        raise SummarizerError(f"{getattr(fn, '__name__', 'the hook')} returned an awaitable: use `{use}`")


async def _within(fut: asyncio.Future[Any], timeout: float, late: str) -> Any:
    """Await ``fut`` for at most ``timeout`` seconds. Only our own deadline becomes
    :class:`SummarizerTimeout`; a ``TimeoutError`` raised by the summarizer itself (its HTTP client
    giving up) passes through as it is (``asyncio.TimeoutError is TimeoutError`` since 3.11, so
    ``wait_for`` cannot tell them apart)."""
    try:
        done, _ = await asyncio.wait({fut}, timeout=timeout)
    except asyncio.CancelledError:
        fut.cancel()
        raise
    if not done:
        fut.cancel()
        raise SummarizerTimeout(late)
    return fut.result()


async def call_async(summarizer: Callable[[SummaryRequest], Any], request: SummaryRequest, deadline: Deadline) -> Any:
    """Run a summarizer from ``acompact()``: awaited, or a sync one in a daemon thread, within
    the compaction's ``deadline``."""
    seconds, late = deadline.left(), deadline.message()
    loop = asyncio.get_running_loop()
    if inspect.iscoroutinefunction(summarizer) or inspect.iscoroutinefunction(
        getattr(summarizer, "__call__", None)  # noqa: B004 - a callable object's async __call__
    ):
        value = summarizer(request)
    else:
        fut: asyncio.Future[Any] = loop.create_future()

        def deliver(ok: bool, payload: Any) -> None:
            if fut.done():
                return
            if ok:
                fut.set_result(payload)
            else:
                fut.set_exception(payload)

        def run() -> None:
            try:
                v = summarizer(request)
                loop.call_soon_threadsafe(deliver, True, v)
            except BaseException as e:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(deliver, False, e)

        threading.Thread(target=run, name="context-compactor-summarizer", daemon=True).start()
        value = await _within(fut, seconds, late)
    if inspect.isawaitable(value):
        value = await _within(asyncio.ensure_future(value), deadline.left(), late)
    return value
