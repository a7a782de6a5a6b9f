"""Gemini (``google-genai``): compact a ``contents`` list before ``generate_content``.

Install with ``pip install "context-compactor[gemini]"``. The compactor reads Gemini ``contents``
natively (dicts or ``google.genai.types.Content``, ``format="gemini"``): kept contents come back
as the same objects, a summary is a ``user`` content with one text part, in the input's own types
(dicts in, dicts out; ``types.Content`` in, ``types.Content`` out), and every part that carries a
``thought_signature`` goes back byte-identical with its part. This module adds what a
``client.models.generate_content(model=..., contents=..., config=...)`` loop needs: the system
instruction and tool declarations read from the request's ``config`` and counted, and
:class:`GeminiChat`, a history that compacts itself before each call and learns from the
response's ``usage_metadata``.

Example::

    from google import genai
    from google.genai import types
    from context_compactor import ContextCompactor
    from context_compactor.integrations.gemini import GeminiChat

    client = genai.Client()
    config = types.GenerateContentConfig(system_instruction="You are a coding agent.", tools=[...])
    chat = GeminiChat(ContextCompactor(max_context_tokens=1_000_000), model="gemini-2.5-flash", config=config)
    response = chat.send(client, "Fix the failing test in billing/tax.py")
    while response.function_calls:
        chat.send(client, [run_tool(call) for call in response.function_calls])  # function_response parts
        response = chat.last_response

``google-genai`` is imported only when a ``str`` message has to become a ``types.Content``; the
compaction itself never imports it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from context_compactor import _core
from context_compactor.compactor import CompactionCheck, ContextCompactor
from context_compactor.results import CompactResult
from context_compactor.session import Session

if TYPE_CHECKING:
    from context_compactor.stores import SessionStore

__all__ = [
    "GeminiChat",
    "acompact_contents",
    "check_contents",
    "compact_contents",
    "request_extras",
]

FORMAT = "gemini"


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        v = obj.get(name)
        if v is None:
            camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
            v = obj.get(camel)
        return v
    return getattr(obj, name, None)


def _tool_json(tool: Any) -> Any:
    """A tool as plain JSON (what the API is sent), or ``None`` for a Python callable the SDK
    declares by itself (automatic function calling): its name and docstring are counted."""
    if isinstance(tool, dict):
        return tool
    dump = getattr(tool, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True, mode="json")
    if callable(tool):
        return {
            "function_declarations": [{"name": getattr(tool, "__name__", "tool"), "description": tool.__doc__ or ""}]
        }
    return tool


def request_extras(config: Any = None, *, system_instruction: Any = None, tools: Any = None) -> tuple[Any, Any]:
    """``(system, tools)`` for the compactor from a ``GenerateContentConfig`` (or its dict):
    ``config.system_instruction`` (a string, a ``Content``, a ``Part`` or a list of them) and
    ``config.tools`` as plain JSON (SDK objects dumped without their unset fields, so they are
    counted as sent). Explicit ``system_instruction=`` / ``tools=`` win over the config's."""
    system = system_instruction if system_instruction is not None else _field(config, "system_instruction")
    raw_tools = tools if tools is not None else _field(config, "tools")
    return system, ([_tool_json(t) for t in raw_tools] if raw_tools else None)


def check_contents(
    compactor: ContextCompactor,
    contents: Sequence[Any],
    *,
    config: Any = None,
    state: _core.ConversationState | None = None,
) -> CompactionCheck:
    """:meth:`ContextCompactor.check` of a Gemini request (``contents`` + ``config``)."""
    system, tools = request_extras(config)
    return compactor.check(contents, system=system, tools=tools, format=FORMAT, state=state)


def compact_contents(
    compactor: ContextCompactor,
    contents: Sequence[Any],
    *,
    config: Any = None,
    force: bool = False,
    state: _core.ConversationState | None = None,
    **kwargs: Any,
) -> CompactResult:
    """:meth:`ContextCompactor.compact` of a Gemini request: ``result.messages`` is the
    ``contents`` to send (in the input's types); the system instruction and tools of ``config``
    are counted, never changed. Extra keywords (``instructions``, ``pinned``) pass through."""
    system, tools = request_extras(config)
    return compactor.compact(contents, system=system, tools=tools, format=FORMAT, force=force, state=state, **kwargs)


async def acompact_contents(
    compactor: ContextCompactor,
    contents: Sequence[Any],
    *,
    config: Any = None,
    force: bool = False,
    state: _core.ConversationState | None = None,
    **kwargs: Any,
) -> CompactResult:
    """:func:`compact_contents` with ``await compactor.acompact(...)`` (async summarizers)."""
    system, tools = request_extras(config)
    return await compactor.acompact(
        contents, system=system, tools=tools, format=FORMAT, force=force, state=state, **kwargs
    )


def _plain(value: Any) -> Any:
    """A system instruction as JSON (an SDK ``Content``/``Part`` dumped without its unset fields)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True, mode="json") if callable(dump) else value


def _prompt_tokens(response: Any) -> int | None:
    usage = _field(response, "usage_metadata")
    n = _field(usage, "prompt_token_count")
    if isinstance(n, int):
        # Implicitly cached tokens are part of the prompt count already.
        return n
    return None


class GeminiChat:
    """A Gemini conversation that compacts itself before each ``generate_content`` call.

    ``contents`` is the history to send (after the latest compaction); ``history`` everything
    appended, as it was. :meth:`send` appends a user turn (text, parts, function responses or a
    whole ``Content``), compacts when due, calls ``client.models.generate_content``, appends the
    model's content (with its thought signatures, unchanged) and feeds the response's
    ``usage_metadata.prompt_token_count`` to the state's calibration. :meth:`asend` does the same
    with ``client.aio`` and :meth:`ContextCompactor.acompact`.

    In memory (the default), contents are kept in the types they are given (``types.Content``
    from the SDK's responses; a ``str`` or a list of parts becomes a ``types.Content``). With
    ``store=`` the conversation persists like any :class:`~context_compactor.session.Session`
    (``format="gemini"``): a SQLite path, ``":memory:"``, a ``postgresql://`` URL or a
    :class:`~context_compactor.SessionStore`; opening the same ``session_id`` again resumes it,
    compactions are saved and :attr:`session` gives ``history()``, ``compactions()`` and
    ``expand()``. Contents then come back as dicts (JSON; thought signatures as base64, which the
    SDK reads back byte-identical).

    Example:
        >>> chat = GeminiChat(compactor, model="gemini-2.5-flash", store="gemini.db", session_id="t")
        >>> chat.append({"role": "user", "parts": [{"text": "Fix the failing test."}]})
        >>> chat.close()
        >>> GeminiChat(compactor, model="gemini-2.5-flash", store="gemini.db", session_id="t").contents
        [{'role': 'user', 'parts': [{'text': 'Fix the failing test.'}]}]
    """

    def __init__(
        self,
        compactor: ContextCompactor,
        *,
        model: str,
        config: Any = None,
        contents: Sequence[Any] | None = None,
        store: str | os.PathLike[str] | SessionStore | None = None,
        session_id: str | None = None,
    ) -> None:
        self.compactor = compactor
        self.model = model
        self.config = config
        self.session: Session | None = None
        self.results: list[CompactResult] = []
        self.last_response: Any = None
        self._contents: list[Any] = list(contents or [])
        self._history: list[Any] = list(self._contents)
        if store is None:
            self.state = _core.ConversationState()
            return
        system, tools = request_extras(config)
        self.session = Session(
            session_id, compactor=compactor, store=store, system=_plain(system), tools=tools, format=FORMAT
        )
        self.state = self.session.state
        if contents:
            self.session.extend(list(contents))

    @property
    def contents(self) -> list[Any]:
        """The contents to send (the latest compaction's, then those appended after it)."""
        return self._contents if self.session is None else self.session.context()

    @property
    def history(self) -> list[Any]:
        """Every content appended, as it was (with a store: read from it)."""
        return self._history if self.session is None else self.session.history()

    # -- building the request ----------------------------------------------------------------

    @staticmethod
    def user_content(message: Any) -> Any:
        """A ``user`` content from a string, a part, a list of parts, or a content as it is."""
        if isinstance(message, dict) and "parts" in message:
            return message
        if type(message).__name__ == "Content" and hasattr(message, "parts"):
            return message
        from google.genai import types

        items = message if isinstance(message, (list, tuple)) else [message]
        parts = [types.Part.from_text(text=p) if isinstance(p, str) else p for p in items]
        return types.Content(role="user", parts=parts)

    def append(self, content: Any) -> None:
        """Append a content (any role) to the history as it is (with a store: one transaction)."""
        if self.session is not None:
            self.session.append(content)
            return
        self._contents.append(content)
        self._history.append(content)

    def prepare(self, *, force: bool = False) -> list[Any]:
        """Compact when due (or ``force``) and return the contents to send."""
        if self.session is not None:
            self._stored(self.session.prepare(force=force))
            return self.session.context()
        result = compact_contents(self.compactor, self._contents, config=self.config, force=force, state=self.state)
        return self._applied(result)

    async def aprepare(self, *, force: bool = False) -> list[Any]:
        """:meth:`prepare` with :meth:`ContextCompactor.acompact`."""
        if self.session is not None:
            self._stored(await self.session.aprepare(force=force))
            return await self.session.acontext()
        result = await acompact_contents(
            self.compactor, self._contents, config=self.config, force=force, state=self.state
        )
        return self._applied(result)

    def _stored(self, result: CompactResult | None) -> None:
        if result is not None and (result.strategy != "none" or result.repairs):
            self.results.append(result)

    def _applied(self, result: CompactResult) -> list[Any]:
        self._stored(result)
        self._contents = list(result.messages)
        return self._contents

    def close(self) -> None:
        """Close the session's store when this chat opened it (nothing to do in memory)."""
        if self.session is not None:
            self.session.close()

    # -- calling the model -------------------------------------------------------------------

    def _received(self, response: Any, sent: list[Any]) -> Any:
        self.last_response = response
        prompt = _prompt_tokens(response)
        if prompt is not None and self.session is not None:
            # Before the reply is appended: the session matches it with what it last sent.
            self.session.record_usage(prompt, model=self.model)
        elif prompt is not None:
            system, tools = request_extras(self.config)
            self.state.observe_usage(prompt, messages=sent, system=system, tools=tools, format=FORMAT)
        candidates = _field(response, "candidates") or []
        content = _field(candidates[0], "content") if candidates else None
        if content is not None and _field(content, "parts"):
            self.append(content)
        return response

    def send(self, client: Any, message: Any = None, **kwargs: Any) -> Any:
        """Append ``message`` as a user turn (when given), compact when due, call
        ``client.models.generate_content(model=..., contents=..., config=...)`` and append the
        reply. Returns the SDK's response."""
        if message is not None:
            self.append(self.user_content(message))
        sent = self.prepare()
        response = client.models.generate_content(model=self.model, contents=sent, config=self.config, **kwargs)
        return self._received(response, sent)

    async def asend(self, client: Any, message: Any = None, **kwargs: Any) -> Any:
        """:meth:`send` with ``client.aio.models.generate_content`` and async summarizers."""
        if message is not None:
            self.append(self.user_content(message))
        sent = await self.aprepare()
        response = await client.aio.models.generate_content(
            model=self.model, contents=sent, config=self.config, **kwargs
        )
        return self._received(response, sent)
