"""Many conversations at once: ``ContextCompactor.compact_many`` / ``acompact_many`` /
``check_many`` (offline evaluation, analytics over session logs, RL rollouts).

Design note:

- Every conversation is read while the GIL is held, then all of them are counted and planned in
  one call with the GIL released on the library's rayon pool (``_core.plan_many``), and finished
  the same way when no summarizer or hook runs (``_core.apply_many``: the built-in rule summary).
  The pool is used from 2 conversations and 64 kB of text (``src/python/batch.rs`` says why).
  A callable tokenizer runs Python code for each text, so it plans one conversation at a time.
- Summarizer calls run concurrently, at most ``max_concurrency`` at a time: a sync summarizer in
  a thread pool (``compact_many``), an async one under an ``asyncio.Semaphore``
  (``acompact_many``; sync ones are run in worker threads there too). Hooks run where the
  conversation's compaction runs (a worker thread in ``compact_many``).
- Results come back in input order. One failing conversation never stops the others: with
  ``return_exceptions=True`` its exception takes its place in the list; by default every
  conversation is still processed and then :class:`BatchError` is raised, carrying the full list
  (``.results``) and the failures (``.errors``, ``(index, exception)`` pairs).
- Telemetry (with ``opentelemetry-api``): a ``context_compactor.compact_many`` span per call,
  parent of one ``context_compactor.compact`` span per conversation (``telemetry.Batch``); the
  pool's conversations, which run no Python step, get theirs when the pool is done.
- No ``state=`` or ``pinned=``: a batch is stateless, each conversation compacted as
  :meth:`ContextCompactor.compact` would without a state.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from context_compactor import _core, _driver
from context_compactor import telemetry as _otel
from context_compactor.errors import CompactorError, ConfigError, MessageTypeError, SummarizerError
from context_compactor.plan import CompactionPlan, result_of
from context_compactor.results import CompactResult

if TYPE_CHECKING:
    from context_compactor.compactor import CompactionCheck, ContextCompactor

__all__ = ["BatchError", "BatchMethods"]

Conversation = tuple[Any, Any, Any, "str | None"]

#: Conversations planned and finished together by ``compact_many`` without a summarizer.
CHUNK = 64


class BatchError(CompactorError):
    """Some conversations of a batch failed (``return_exceptions=False``); the others were done.

    Attributes:
        results: One entry per conversation, in input order: the result, or the exception.
        errors: ``(index, exception)`` for each failed conversation.
    """

    def __init__(self, results: list[Any]) -> None:
        self.results = results
        self.errors = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
        first = ", ".join(f"conversation {i}: {type(e).__name__}: {e}" for i, e in self.errors[:3])
        more = f" (and {len(self.errors) - 3} more)" if len(self.errors) > 3 else ""
        super().__init__(f"{len(self.errors)} of {len(results)} conversations failed: {first}{more}")


def _conversation(item: Any, index: int, system: Any, tools: Any, format: str | None) -> Conversation:
    """``(messages, system, tools, format)`` of one batch item: a message list, a
    :class:`~context_compactor.io.Transcript`, or a mapping ``{"messages", "system", "tools",
    "format"}`` (an Anthropic request body works as it is)."""
    if isinstance(item, Mapping):
        if "messages" not in item:
            raise MessageTypeError(
                f"conversation {index}: a mapping needs a 'messages' key (got keys {sorted(map(str, item))[:5]})",
                index=index,
                field="messages",
            )
        return (item["messages"], item.get("system", system), item.get("tools", tools), item.get("format", format))
    if hasattr(item, "messages") and hasattr(item, "format") and not isinstance(item, (list, tuple)):
        return (item.messages, getattr(item, "system", None), getattr(item, "tools", None), item.format)
    if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
        raise MessageTypeError(
            f"conversation {index}: expected a list of messages, a Transcript or a mapping with 'messages', "
            f"got {type(item).__name__}",
            index=index,
            field="messages",
        )
    return (item, system, tools, format)


def _check_concurrency(max_concurrency: Any) -> None:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ConfigError(f"max_concurrency: expected an int >= 1, got {max_concurrency!r}", "max_concurrency")


def _finish(results: list[Any], return_exceptions: bool) -> list[Any]:
    if not return_exceptions and any(isinstance(r, BaseException) for r in results):
        raise BatchError(results)
    return results


def _host(methods: BatchMethods) -> ContextCompactor:
    """The compactor these methods are part of: :class:`BatchMethods` is mixed into
    :class:`~context_compactor.ContextCompactor` only."""
    return cast("ContextCompactor", methods)


class BatchMethods:
    """The batch methods of :class:`ContextCompactor` (a mixin: this module stays out of the
    compactor's file, and needs nothing from it at import time)."""

    __slots__ = ()

    def _batch_items(
        self, conversations: Iterable[Any], system: Any, tools: Any, format: str | None
    ) -> tuple[list[Conversation | None], list[Any]]:
        items: list[Conversation | None] = []
        results: list[Any] = []
        for i, c in enumerate(conversations):
            try:
                items.append(_conversation(c, i, system, tools, format))
                results.append(None)
            except Exception as e:
                items.append(None)
                results.append(e)
        return items, results

    def _plan_many(
        self,
        items: list[Conversation | None],
        results: list[Any],
        force: bool,
        instructions: str | None,
    ) -> list[CompactionPlan | None]:
        """Plan every readable conversation; failures go into ``results``."""
        cc = _host(self)
        from context_compactor._recall_scope import check_recall

        check_recall(cc._config.recall, cc._config.offload_dir)
        todo = [(i, c) for i, c in enumerate(items) if c is not None]
        tokenizer = cc._config.tokenizer
        plans: list[CompactionPlan | None] = [None] * len(items)
        if callable(tokenizer):
            for i, (m, s, t, f) in todo:
                try:
                    plans[i] = cc.plan(m, system=s, tools=t, format=f, force=force, instructions=instructions)
                except Exception as e:
                    results[i] = e
            return plans
        core = _core.plan_many(
            [c for _, c in todo],
            config=cc._config,
            mode="force" if force else "auto",
            instructions=instructions,
        )
        for (i, _), p in zip(todo, core, strict=True):
            if isinstance(p, BaseException):
                results[i] = p
            else:
                plans[i] = CompactionPlan(p, tokenizer)
        return plans

    def _steps_of(self, item: Conversation, plan: CompactionPlan, force: bool, instructions: Any) -> Any:
        cc = _host(self)
        m, s, t, f = item
        return cc._steps(
            m, system=s, tools=t, format=f, force=force, instructions=instructions, pinned=None, state=None, plan=plan
        )

    def compact_many(
        self,
        conversations: Iterable[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        force: bool = False,
        instructions: str | None = None,
        max_concurrency: int = 8,
        return_exceptions: bool = False,
    ) -> list[CompactResult]:
        """Compact many conversations: :meth:`compact` for each, planned on the rayon pool with
        the GIL released, summarizer calls concurrent.

        Args:
            conversations: Each a message list, a :class:`~context_compactor.io.Transcript`, or a
                mapping ``{"messages", "system", "tools", "format"}``.
            system, tools, format: Defaults for the items that do not carry their own.
            max_concurrency: At most this many summarizer calls at once (a thread pool).
            return_exceptions: ``True``: a failed conversation's exception takes its place in the
                list. ``False`` (default): all conversations are still processed, then
                :class:`BatchError` is raised with the full list as ``.results``.

        Returns:
            One :class:`CompactResult` per conversation, in input order.

        An async summarizer or hook needs :meth:`acompact_many` (no event loop is run here).
        """
        cc = _host(self)
        _check_concurrency(max_concurrency)
        for fn in (cc.summarizer, cc.on_before_compact, cc.on_compacted):
            if fn is not None and inspect.iscoroutinefunction(fn):
                raise SummarizerError(
                    f"{getattr(fn, '__name__', 'an async callable')} is async: use `await compactor.acompact_many(...)`"
                )
        items, results = cc._batch_items(conversations, system, tools, format)
        if _otel.TRACER is None:
            cc._compact_many(items, results, force, instructions, max_concurrency, None)
            return _finish(results, return_exceptions)
        with _otel.batch(cc, force) as tel:
            start = time.time_ns()
            try:
                cc._compact_many(items, results, force, instructions, max_concurrency, tel)
            finally:
                tel.done(results, start)
            return _finish(results, return_exceptions)

    def _compact_many(
        self,
        items: list[Conversation | None],
        results: list[Any],
        force: bool,
        instructions: str | None,
        max_concurrency: int,
        tel: _otel.Batch | None,
    ) -> None:
        """:meth:`compact_many`'s work: each result (or exception) into ``results``."""
        cc = _host(self)
        plain = cc.summarizer is None and cc.on_before_compact is None and cc.on_compacted is None
        if plain and not callable(cc._config.tokenizer):
            # Rule summaries only: plan and finish on the pool, GIL released, CHUNK conversations
            # at a time (the views of a chunk stay in the CPU's caches and memory stays bounded).
            for start in range(0, len(items), CHUNK):
                part = items[start : start + CHUNK]
                part_results = results[start : start + CHUNK]
                plans = cc._plan_many(part, part_results, force, instructions)
                todo = [i for i, p in enumerate(plans) if p is not None]
                done = _core.apply_many(
                    [plans[i]._core_plan for i in todo],  # type: ignore[union-attr]
                    [None] * len(todo),
                    tokenizer=cc._config.tokenizer,
                )
                for i, d in zip(todo, done, strict=True):
                    part_results[i] = d if isinstance(d, BaseException) else _driver.done(cc._config, result_of(d))
                results[start : start + CHUNK] = part_results
            return
        plans = cc._plan_many(items, results, force, instructions)
        todo = [i for i, p in enumerate(plans) if p is not None]

        def one(i: int) -> Any:
            try:
                steps = cc._steps_of(items[i], plans[i], force, instructions)  # type: ignore[arg-type]
                return cc._drive(steps) if tel is None else tel.drive(i, cc._drive, steps)
            except Exception as e:
                return e

        # Only conversations whose plan asks for a summary wait for the summarizer: the others
        # finish here without a thread.
        slow = [i for i in todo if cc.on_before_compact is not None or plans[i].request is not None]  # type: ignore[union-attr]
        waiting = set(slow)
        for i in todo:
            if i not in waiting:
                results[i] = one(i)
        if slow:
            with ThreadPoolExecutor(max_workers=min(max_concurrency, len(slow))) as pool:
                for i, r in zip(slow, pool.map(one, slow), strict=True):
                    results[i] = r

    async def acompact_many(
        self,
        conversations: Iterable[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        force: bool = False,
        instructions: str | None = None,
        max_concurrency: int = 8,
        return_exceptions: bool = False,
    ) -> list[CompactResult]:
        """:meth:`compact_many` for async code: async (or sync, in worker threads) summarizers and
        hooks, at most ``max_concurrency`` summaries at once (an ``asyncio.Semaphore``).
        Cancelling it cancels every running compaction and applies nothing more."""
        cc = _host(self)
        _check_concurrency(max_concurrency)
        items, results = cc._batch_items(conversations, system, tools, format)
        if _otel.TRACER is None:
            await cc._acompact_many(items, results, force, instructions, max_concurrency, None)
            return _finish(results, return_exceptions)
        with _otel.batch(cc, force) as tel:
            start = time.time_ns()
            try:
                await cc._acompact_many(items, results, force, instructions, max_concurrency, tel)
            finally:
                tel.done(results, start)
            return _finish(results, return_exceptions)

    async def _acompact_many(
        self,
        items: list[Conversation | None],
        results: list[Any],
        force: bool,
        instructions: str | None,
        max_concurrency: int,
        tel: _otel.Batch | None,
    ) -> None:
        """:meth:`acompact_many`'s work: each result (or exception) into ``results``."""
        cc = _host(self)
        # Planning is CPU work with the GIL released: off the event loop.
        plans = await asyncio.to_thread(cc._plan_many, items, results, force, instructions)
        gate = asyncio.Semaphore(max_concurrency)

        async def one(i: int) -> None:
            async with gate:
                try:
                    steps = cc._steps_of(items[i], plans[i], force, instructions)  # type: ignore[arg-type]
                    results[i] = await (cc._adrive(steps) if tel is None else tel.adrive(i, cc._adrive, steps))
                except Exception as e:
                    results[i] = e

        await asyncio.gather(*(one(i) for i, p in enumerate(plans) if p is not None))

    def check_many(
        self,
        conversations: Iterable[Any],
        *,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
        return_exceptions: bool = False,
    ) -> list[CompactionCheck]:
        """:meth:`check` for many conversations (items as for :meth:`compact_many`), counted on
        the rayon pool with the GIL released. One :class:`CompactionCheck` per conversation, in
        input order; failures as in :meth:`compact_many`."""
        cc = _host(self)
        items, results = cc._batch_items(conversations, system, tools, format)
        todo = [(i, c) for i, c in enumerate(items) if c is not None]
        cfg = cc._config
        if callable(cfg.tokenizer):
            for i, (m, s, t, f) in todo:
                try:
                    results[i] = cc.check(m, system=s, tools=t, format=f)
                except Exception as e:
                    results[i] = e
            return _finish(results, return_exceptions)
        counts = _core.measure_many(
            [c for _, c in todo],
            tokenizer=cfg.tokenizer,
            message_overhead_tokens=cfg.message_overhead_tokens,
            image_tokens=cfg.image_tokens,
            image_model=cfg.image_model,
        )
        for (i, _), c in zip(todo, counts, strict=True):
            if isinstance(c, BaseException):
                results[i] = c
            else:
                total, n, fmt = c
                results[i] = cc._verdict(total, total, 1.0, n, fmt)
        return _finish(results, return_exceptions)
