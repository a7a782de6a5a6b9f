"""What a :class:`~context_compactor.session.Session` runs under its compacting lock, synchronously:
``prepare`` (in the foreground, or by driving the background policy's steps), ``pop`` and ``clear``.

Split out of ``session.py``, which is the public API and its docstrings; the Session calls these
with the parts it holds (its :class:`~context_compactor._session_core.SessionCore` and its
:class:`~context_compactor._session_background.BackgroundPolicy`). The async twins are in
:mod:`context_compactor._session_async`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from context_compactor import telemetry as _otel
from context_compactor._recall_scope import session_scope
from context_compactor._session_core import ATTEMPTS, Retry, SessionCore, stored_format, stored_json
from context_compactor._summarize import call_hook_sync
from context_compactor.errors import StoreError

if TYPE_CHECKING:
    from context_compactor._session_background import BackgroundPolicy
    from context_compactor.compactor import ContextCompactor
    from context_compactor.results import CompactResult

__all__ = ["clear", "foreground", "pop", "prepare"]


def prepare(
    core: SessionCore, background: BackgroundPolicy, force: bool, instructions: str | None
) -> CompactResult | None:
    """:meth:`Session.prepare <context_compactor.session.Session.prepare>`."""
    core.check_open()
    if not core.compacting.acquire(timeout=core.wait()):
        raise StoreError("another prepare() of this Session ran too long")
    conversation = _otel.enter(core.id)
    try:
        if force:
            background.cancel()
        if not core.compactor.config.background or force:
            return foreground(core, core.compactor, force, instructions)
        steps = background.steps(instructions)
        value: Any = None
        now: Any = None  # a foreground result: compact() recorded its telemetry
        while True:
            try:
                kind, arg = steps.send(value)
            except StopIteration as stop:
                return _otel.mark(stop.value, now)
            value = None
            if kind == "hook":
                call_hook_sync(arg[0], arg[1], "await session.aprepare()")
            elif kind == "now":
                value = now = foreground(core, background.rule_compactor(), False, instructions)
            elif kind == "run":
                arg.run()
            elif kind == "wait":
                arg[0].wait(arg[1])
            else:
                arg.start_thread()
    finally:
        _otel.leave(conversation)
        core.compacting.release()


def foreground(
    core: SessionCore, compactor: ContextCompactor, force: bool, instructions: str | None
) -> CompactResult | None:
    """Compact now, waiting for the summary; retried when another connection compacted first."""
    for _ in range(ATTEMPTS):
        snap = core.begin(force)
        if snap is None:
            return None
        with session_scope():
            result = compactor.compact(
                snap.messages,
                system=snap.system,
                tools=core.tools,
                format=core.fmt,
                force=force,
                instructions=instructions,
                state=core.state,
            )
        done = core.settle(snap, result)
        if not isinstance(done, Retry):
            return done
    raise StoreError(f"other connections compacted this session first {ATTEMPTS} times in a row")


def pop(core: SessionCore) -> dict[str, Any] | None:
    """:meth:`Session.pop <context_compactor.session.Session.pop>`."""
    if not core.compacting.acquire(timeout=core.wait()):
        raise StoreError("a prepare() of this Session ran too long")
    try:
        with core.store.locked():
            popped = core.store.pop_original(core.id)
            core.marker = None
            core.take(core.store.load_context(core.id))
        return None if popped is None else json.loads(popped[1])
    finally:
        core.compacting.release()


def clear(core: SessionCore) -> None:
    """:meth:`Session.clear <context_compactor.session.Session.clear>`."""
    if not core.compacting.acquire(timeout=core.wait()):
        raise StoreError("a prepare() of this Session ran too long")
    try:
        with core.store.locked():
            system, tools = core.stored_system, core.tools
            core.store.delete_session(core.id)
            info = core.store.open_session(
                core.id,
                system=None if system is None else stored_json(system, "system"),
                tools=None if tools is None else stored_json(tools, "tools"),
                format=stored_format(core.format),
            )
            core.marker = None
            core.take(info.context)
    finally:
        core.compacting.release()
