"""LangChain and LangGraph: ``BaseMessage`` lists, and a v1 agent middleware.

``pip install "context-compactor[langchain]"``. Every function of the package takes LangChain
messages as they are (``check``, ``compact``, ``plan``, ``validate_messages``, ``TokenCounter``):
the Rust reader reads them by attribute (a message's ``type`` — ``human``/``ai``/``tool``/
``system`` — stands for the role; ``AIMessage.tool_calls`` are the calls, a ``ToolMessage`` is
their result, content blocks of ``ChatAnthropic``/``ChatOpenAI`` and v1 standard blocks are read
in place). The result's kept messages are the same objects; new and edited ones are LangChain
classes (the summary is a ``HumanMessage``, each new message gets an ``id`` so that LangGraph's
``add_messages`` reducer can place it).

Design note: the conversion back (:func:`from_core_output`) runs only on the few new or edited
messages of a result, so it costs nothing per kept message; the reading stays in Rust
(``src/python/extract/langchain.rs``). On 10k corpus messages a cold ``check()`` costs 1.4-1.8x
the same conversation as dicts, where converting every message to a dict in Python first and
checking that cost 1.9x (``benches/bench_adapters.py``; process CPU time on a shared machine).

Example:
    >>> from langchain.agents import create_agent
    >>> from context_compactor import ContextCompactor
    >>> from context_compactor.integrations.langchain import ContextCompactorMiddleware
    >>> compactor = ContextCompactor(max_context_tokens=128_000, summarizer=my_llm)
    >>> agent = create_agent(model, tools, middleware=[ContextCompactorMiddleware(compactor)])  # any chat model
    >>> state = agent.invoke({"messages": [{"role": "user", "content": "Fix the failing test."}]})
    >>> compactor.check(state["messages"]).should_compact
    False
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from context_compactor.errors import MessageTypeError
from context_compactor.recall import DESCRIPTION, TOOL_NAME, Recall

if TYPE_CHECKING:
    from context_compactor.compactor import ContextCompactor
    from context_compactor.results import CompactResult, SummaryRequest

__all__ = [
    "ContextCompactorMiddleware",
    "chat_model_summarizer",
    "langgraph_pre_model_hook",
    "to_langchain",
    "to_openai",
]

#: A rebuilt message's ``type`` (its ``model_dump``) -> the class it comes back as (a streamed
#: chunk comes back as its whole-message class).
_BY_TYPE: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "HumanMessageChunk": HumanMessage,
    "ai": AIMessage,
    "AIMessageChunk": AIMessage,
    "tool": ToolMessage,
    "ToolMessageChunk": ToolMessage,
    "system": SystemMessage,
    "SystemMessageChunk": SystemMessage,
    "function": FunctionMessage,
    "FunctionMessageChunk": FunctionMessage,
}
#: Fields of a chunk that its whole-message class does not have.
_CHUNK_ONLY = ("tool_call_chunks", "chunk_position", "type")


def _new_id() -> str:
    return f"cc-{uuid.uuid4()}"


def _calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI ``tool_calls`` (a new assistant message) as LangChain tool calls."""
    out = []
    for c in calls:
        f = c.get("function") or {}
        raw = f.get("arguments") or "{}"
        try:
            args = json.loads(raw)
        except ValueError:
            args = None
        if not isinstance(args, dict):
            args = {"_truncated": raw}
        out.append({"name": f.get("name", ""), "args": args, "id": c.get("id"), "type": "tool_call"})
    return out


def to_langchain(message: Any) -> BaseMessage:
    """One output message as a LangChain message: a ``BaseMessage`` is returned as it is, an
    edited message (the ``model_dump`` of a LangChain message) comes back as its own class, and a
    new message (an OpenAI-style dict: the summary, a repaired tool result) as the class of its
    role."""
    if isinstance(message, BaseMessage):
        return message
    d = dict(message)
    ty = d.get("type")
    if isinstance(ty, str) and ty in _BY_TYPE:
        cls = _BY_TYPE[ty]
        for key in _CHUNK_ONLY:
            d.pop(key, None)
        if d.get("content") is None:
            d["content"] = ""
        return cls(**d)
    role, content = d.get("role"), d.get("content")
    if content is None:
        content = ""
    if role == "user":
        return HumanMessage(content=content, id=_new_id())
    if role == "assistant":
        return AIMessage(content=content, tool_calls=_calls(d.get("tool_calls") or ()), id=_new_id())
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=d.get("tool_call_id") or "", id=_new_id())
    if role in ("system", "developer"):
        return SystemMessage(content=content, id=_new_id())
    if role == "function":
        return FunctionMessage(content=content, name=d.get("name") or "", id=_new_id())
    raise MessageTypeError(f"cannot make a LangChain message of role {role!r}", None, "role")


def to_openai(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as a Chat Completions message (LangChain's own
    ``convert_to_openai_messages``): how a :class:`~context_compactor.Session` stores one. A
    session's ``context()`` gives such dicts back, which LangChain takes wherever it takes
    messages."""
    from langchain_core.messages import convert_to_openai_messages

    return convert_to_openai_messages(message)


def from_core_output(messages: list[Any]) -> list[BaseMessage]:
    """The output of a compaction of LangChain messages, as LangChain messages (the shell's
    ``plan.result_of`` calls it when the core tags its output ``langchain``)."""
    return [m if isinstance(m, BaseMessage) else to_langchain(m) for m in messages]


# -- summarizer ------------------------------------------------------------------------------------


def chat_model_summarizer(model: Any, *, asynchronous: bool = False) -> Callable[[SummaryRequest], Any]:
    """A summarizer that calls a LangChain chat model: ``model.invoke``, or ``await
    model.ainvoke`` with ``asynchronous=True`` (for ``acompact`` and ``abefore_model``).

    The request's messages (a system prompt and the user prompt) are sent as they are; the
    reply's text is the summary.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        >>> from itertools import repeat
        >>> model = GenericFakeChatModel(messages=repeat(AIMessage("The user asked to fix a test.")))
        >>> compactor = ContextCompactor(max_context_tokens=3_000, summarizer=chat_model_summarizer(model))
        >>> compactor.compact(messages).summary_source             # e.g. ChatOpenAI(model="gpt-4.1-mini")
        'llm'
    """
    if asynchronous:

        async def asummarize(request: SummaryRequest) -> str:
            return _text(await model.ainvoke(list(request.messages)))

        return asummarize

    def summarize(request: SummaryRequest) -> str:
        return _text(model.invoke(list(request.messages)))

    return summarize


def _text(reply: Any) -> str:
    text = getattr(reply, "text", None)
    if isinstance(text, str):  # a str subclass in langchain-core 1.x
        return str(text)
    return str(getattr(reply, "content", reply))


# -- the v1 agent middleware ------------------------------------------------------------------------


def _middleware_base() -> type:
    from langchain.agents.middleware import AgentMiddleware

    return AgentMiddleware


def _system_text(request: Any) -> str | None:
    sm = getattr(request, "system_message", None)
    if sm is None:
        return None
    return str(sm.text)


class ContextCompactorMiddleware(_middleware_base()):  # type: ignore[misc]
    """Keeps a ``create_agent`` agent's messages inside the window; drops in where LangChain's
    ``SummarizationMiddleware`` goes.

    Before each model call it compacts when :meth:`ContextCompactor.check` says it is due. By
    default it rewrites the agent state, as ``SummarizationMiddleware`` does (``RemoveMessage(id=
    REMOVE_ALL_MESSAGES)`` then the compacted messages), so that the next step starts from the
    compacted history. With ``rewrite_state=False`` the state keeps every message and only the
    model's input is compacted (``wrap_model_call``), each call again.

    Args:
        compactor: The :class:`ContextCompactor` (its window, its summarizer: see
            :func:`chat_model_summarizer` to summarise with a LangChain chat model).
        rewrite_state: Rewrite the state (default) or change only the model's input.

    Example:
        >>> from langchain.agents import create_agent
        >>> agent = create_agent(model, tools, middleware=[ContextCompactorMiddleware(compactor)])
    """

    def __init__(self, compactor: ContextCompactor, *, rewrite_state: bool = True) -> None:
        super().__init__()
        self.compactor = compactor
        self.rewrite_state = rewrite_state
        #: The last compaction's result (for logging and tests).
        self.last_result: CompactResult | None = None

    @property
    def name(self) -> str:
        return "ContextCompactorMiddleware"

    def _due(self, messages: Sequence[Any], system: Any = None) -> bool:
        return bool(messages) and self.compactor.check(messages, system=system).should_compact

    def _update(self, result: CompactResult) -> dict[str, Any] | None:
        self.last_result = result
        if result.strategy == "none":
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages]}

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if not self.rewrite_state or not self._due(messages):
            return None
        return self._update(self.compactor.compact(messages))

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if not self.rewrite_state or not self._due(messages):
            return None
        return self._update(await self.compactor.acompact(messages))

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        system = _system_text(request)
        if self.rewrite_state or not self._due(request.messages, system):
            return handler(request)
        result = self.compactor.compact(request.messages, system=system)
        self.last_result = result
        return handler(request.override(messages=list(result.messages)))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        system = _system_text(request)
        if self.rewrite_state or not self._due(request.messages, system):
            return await handler(request)
        result = await self.compactor.acompact(request.messages, system=system)
        self.last_result = result
        return await handler(request.override(messages=list(result.messages)))


def langgraph_pre_model_hook(compactor: ContextCompactor) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Legacy: a ``pre_model_hook`` for LangGraph's deprecated ``create_react_agent`` that hands
    the model a compacted copy (``llm_input_messages``) and leaves the state as it is. New code
    uses :class:`ContextCompactorMiddleware` with ``create_agent``.

    Example:
        >>> from langgraph.prebuilt import create_react_agent
        >>> agent = create_react_agent(model, tools, pre_model_hook=langgraph_pre_model_hook(compactor))
    """

    def hook(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        if messages and compactor.check(messages).should_compact:
            messages = compactor.compact(messages).messages
        return {"llm_input_messages": list(messages)}

    return hook


def recall_tool(recall: Recall, *, name: str = TOOL_NAME) -> Any:
    """The ``recall`` tool (:mod:`context_compactor.recall`) as a LangChain ``StructuredTool``:
    pass it to ``create_agent(tools=[...])`` or ``model.bind_tools([...])``.

    Example:
        tool = recall_tool(Recall(session))
        agent = create_agent(model, tools=[tool, *my_tools], middleware=[ContextCompactorMiddleware(compactor)])
    """
    from langchain_core.tools import StructuredTool

    def run(id: str, start: int = 0, count: int | None = None, pattern: str | None = None) -> str:
        return recall(id, start=start, count=count, pattern=pattern)

    return StructuredTool.from_function(func=run, name=name, description=DESCRIPTION)
