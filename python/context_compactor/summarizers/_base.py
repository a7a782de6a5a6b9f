"""The shared base of the ready summarizers: the callables the factories return, argument checks,
and reading a Chat Completions reply (used by :mod:`.openai` and :mod:`.http`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from context_compactor.results import SummaryRequest, SummaryResponse

__all__ = ["AsyncSummarizer", "ResponseFormatError", "Summarizer"]

#: Request fields that set the reply's token limit.
_TOKEN_LIMIT_KEYS = frozenset({"max_tokens", "max_completion_tokens"})


class ResponseFormatError(ValueError):
    """A server answered 2xx with something that is not a chat completion (not JSON, no choices).

    Example:
        >>> from context_compactor.summarizers import ResponseFormatError
        >>> isinstance(ResponseFormatError("the reply is not JSON"), ValueError)
        True
    """


class _Base:
    def __init__(self, name: str, model: str, details: str, call: Callable[[SummaryRequest], Any]) -> None:
        self.__name__ = name
        self.__qualname__ = name
        self.model = model
        self._details = details
        self._call = call

    def __repr__(self) -> str:
        return f"{self.__name__}({self._details})"


class Summarizer(_Base):
    """A ready synchronous summarizer: ``summarizer(request) -> SummaryResponse``.

    Made by :func:`openai_chat` / :func:`anthropic_messages` for a sync client and by
    :func:`openai_compatible`. Works under ``compact()`` and, in a worker thread, under
    ``acompact()``.

    Attributes:
        __name__: The factory's name (``"openai_chat"``, ``"anthropic_messages"``, ``"openai_compatible"``).
        model: The model it asks.

    Example:
        >>> from context_compactor.summarizers import openai_compatible
        >>> s = openai_compatible("http://127.0.0.1:8000/v1", "qwen2.5")
        >>> s.__name__, s.model
        ('openai_compatible', 'qwen2.5')
    """

    def __call__(self, request: SummaryRequest) -> SummaryResponse:
        """Ask the model to summarise ``request``."""
        return self._call(request)  # type: ignore[no-any-return]


class AsyncSummarizer(_Base):
    """A ready asynchronous summarizer: ``await summarizer(request) -> SummaryResponse``.

    Made by :func:`openai_chat` / :func:`anthropic_messages` for an async client and by
    :func:`async_openai_compatible`. Use it with ``await compactor.acompact(...)``; ``compact()``
    rejects an awaitable reply with a :class:`~context_compactor.SummarizerError`.

    Example:
        >>> from context_compactor.summarizers import async_openai_compatible
        >>> s = async_openai_compatible("http://127.0.0.1:11434/v1", "llama3.2")
        >>> s
        async_openai_compatible(model='llama3.2', base_url='http://127.0.0.1:11434/v1')
    """

    async def __call__(self, request: SummaryRequest) -> SummaryResponse:
        """Ask the model to summarise ``request``."""
        return await self._call(request)  # type: ignore[no-any-return]


# -- helpers ------------------------------------------------------------------------------------------


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` for SDK objects, ``obj[name]`` for plain dicts."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _is_async(client: Any, create: Any) -> bool:
    """Whether ``create`` is a coroutine function (the SDKs wrap theirs in a sync decorator)."""
    try:
        if inspect.iscoroutinefunction(inspect.unwrap(create)):
            return True
    except ValueError:  # a __wrapped__ cycle (e.g. some mocks)
        pass
    return inspect.iscoroutinefunction(create) or type(client).__name__.startswith("Async")


def _check_params(fn: str, params: Mapping[str, Any], reserved: frozenset[str]) -> None:
    bad = sorted(reserved & params.keys())
    if bad:
        raise TypeError(f"{fn}() sets {', '.join(bad)} itself; do not pass {'it' if len(bad) == 1 else 'them'}")


def _check_signature(fn: str, create: Any, params: Mapping[str, Any]) -> None:
    """Refuse ``params`` the SDK's ``create()`` does not take, now rather than at every compaction
    (a ``TypeError`` from the call would only show as a fallback to the rule summary)."""
    try:
        sig = inspect.signature(inspect.unwrap(create))
    except (TypeError, ValueError):  # no signature to read (C functions, mocks with cycles)
        return
    accepted = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return
    unknown = sorted(params.keys() - accepted.keys())
    if unknown:
        raise TypeError(
            f"{fn}(): this client's create() does not accept {', '.join(unknown)} "
            "(pass provider-specific fields in extra_body={...})"
        )


def sdk_summarizer(
    name: str,
    model: str,
    client: Any,
    params: Mapping[str, Any],
    call: Callable[..., Any],
    build: Callable[[SummaryRequest], dict[str, Any]],
    parse: Callable[[Any], SummaryResponse],
    wrap_error: Callable[[Exception], Exception] | None = None,
) -> Summarizer | AsyncSummarizer:
    """A summarizer around an SDK call: ``parse(call(**build(request)))``, awaited when ``call``
    is a coroutine function (then an :class:`AsyncSummarizer`). With ``wrap_error``, an exception
    the call raises is replaced by ``wrap_error(e)`` (chained); without, it passes unchanged."""
    details = _details(model, client, params)
    if _is_async(client, call):

        async def acall(request: SummaryRequest) -> SummaryResponse:
            kw = build(request)
            try:
                response = await call(**kw)
            except Exception as e:
                if wrap_error is None:
                    raise
                raise wrap_error(e) from e
            return parse(response)

        return AsyncSummarizer(name, model, details, acall)

    def scall(request: SummaryRequest) -> SummaryResponse:
        kw = build(request)
        try:
            response = call(**kw)
        except Exception as e:
            if wrap_error is None:
                raise
            raise wrap_error(e) from e
        return parse(response)

    return Summarizer(name, model, details, scall)


def _details(model: str, client: Any, params: Mapping[str, Any]) -> str:
    parts = [f"model={model!r}"]
    if client is not None:
        parts.append(f"client={type(client).__name__}")
    if params:  # names only: values may hold headers or keys
        parts.append(f"params={sorted(params)}")
    return ", ".join(parts)


def _client_attr(fn: str, client: Any, path: str) -> Any:
    obj = client
    for name in path.split("."):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise TypeError(f"{fn}() expects a client with .{path}(); got {type(client).__name__}") from None
    return obj


def _openai_response(response: Any) -> SummaryResponse:
    """A Chat Completions reply (SDK object or parsed JSON) as a :class:`SummaryResponse`."""
    choices = _field(response, "choices")
    if not choices:
        raise ResponseFormatError("the reply has no choices")
    choice = choices[0]
    content = _field(_field(choice, "message"), "content")
    if isinstance(content, list):  # a few servers answer with content parts
        content = "".join(str(_field(p, "text") or "") for p in content if _field(p, "type") == "text")
    text = content if isinstance(content, str) else ""
    return SummaryResponse(
        text,
        truncated=_field(choice, "finish_reason") == "length",
        usage=_field(response, "usage"),
    )
