"""Ready summarizers: the OpenAI and Anthropic SDKs, and any OpenAI-compatible HTTP server.

Each factory returns a callable ``SummaryRequest -> SummaryResponse`` to pass as
``ContextCompactor(summarizer=...)``. ``truncated`` comes from the finish/stop reason and
``usage`` is the provider's usage object, so the compactor can tell a cut-off summary apart.

- :func:`openai_chat` wraps ``openai.OpenAI`` / ``openai.AsyncOpenAI`` (and Azure's clients):
  Chat Completions with ``max_completion_tokens`` (reasoning models require it).
- :func:`anthropic_messages` wraps ``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic`` (and
  the Bedrock / Vertex clients): Messages with the system prompt as ``system``, no tools.
- :func:`openai_compatible` / :func:`async_openai_compatible` speak plain HTTP (standard library
  only) to vLLM, Ollama, llama.cpp, LM Studio and similar servers: ``POST
  {base_url}/chat/completions`` with ``max_tokens``, which those servers accept.

The SDK wrappers are sync or async after the client (an async client gives an ``async``
callable; use it with ``await compactor.acompact(...)``). Neither SDK is imported by this module:
install the extra you use, ``context-compactor[openai]`` or ``context-compactor[anthropic]``.

Errors are not caught here: they reach the compactor's failure ladder as they are. The SDKs'
own classes (``RateLimitError``, ``OverloadedError``, ``AuthenticationError``, …) are recognised
by name; :func:`openai_compatible` raises :class:`HTTPStatusError` (with ``status_code``) for an
HTTP error status, ``TimeoutError`` and ``ConnectionError`` for network failures, and
:class:`ResponseFormatError` for a reply that is not a chat completion. API keys never appear in
a ``repr``, an error message or a log record.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import inspect
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, overload

from context_compactor.results import SummaryRequest, SummaryResponse

if TYPE_CHECKING:
    from anthropic import (
        Anthropic,
        AnthropicBedrock,
        AnthropicVertex,
        AsyncAnthropic,
        AsyncAnthropicBedrock,
        AsyncAnthropicVertex,
    )
    from openai import AsyncOpenAI, OpenAI

__all__ = [
    "AsyncSummarizer",
    "HTTPStatusError",
    "ResponseFormatError",
    "Summarizer",
    "anthropic_messages",
    "async_openai_compatible",
    "openai_chat",
    "openai_compatible",
]

#: Request fields the wrappers set themselves (or that would break a summary call).
_OPENAI_RESERVED = frozenset({"model", "messages", "stream", "tools", "tool_choice", "functions", "function_call"})
_ANTHROPIC_RESERVED = frozenset({"model", "system", "messages", "stream", "tools", "tool_choice"})
_TOKEN_LIMIT_KEYS = frozenset({"max_tokens", "max_completion_tokens"})
#: Anthropic stop reasons that mean the reply was cut off.
_ANTHROPIC_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})
#: At most this much of a reply body is read (a summary is a few KiB).
_MAX_BODY_BYTES = 16 * 1024 * 1024
#: At most this much of an error body is kept on :class:`HTTPStatusError`.
_MAX_ERROR_BODY_CHARS = 64 * 1024
_THINK_PREFIX = re.compile(r"\A\s*<think>.*?(?:</think>\s*|\Z)", re.DOTALL)

try:  # the package version for the User-Agent header of openai_compatible
    from context_compactor._core import __version__ as _VERSION
except Exception:  # pragma: no cover - only without the native module
    _VERSION = "unknown"


# -- the callables the factories return ---------------------------------------------------------------


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


def _anthropic_response(response: Any) -> SummaryResponse:
    """A Messages reply as a :class:`SummaryResponse`: the text blocks joined, thinking skipped."""
    blocks = _field(response, "content") or ()
    text = "".join(str(_field(b, "text") or "") for b in blocks if _field(b, "type") == "text")
    return SummaryResponse(
        text,
        truncated=_field(response, "stop_reason") in _ANTHROPIC_TRUNCATED,
        usage=_field(response, "usage"),
    )


# -- OpenAI SDK ---------------------------------------------------------------------------------------


@overload
def openai_chat(client: AsyncOpenAI, model: str, **params: Any) -> AsyncSummarizer: ...
@overload
def openai_chat(client: OpenAI, model: str, **params: Any) -> Summarizer: ...
@overload
def openai_chat(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer: ...
def openai_chat(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer:
    """A summarizer that calls ``client.chat.completions.create``.

    Sends ``model``, ``request.messages`` (system + user, no tools) and
    ``max_completion_tokens=request.max_tokens`` (the field reasoning models require) plus
    ``params``. Pass ``max_completion_tokens=`` to give a reasoning model room beyond the
    summary cap, or ``max_tokens=`` for an older deployment that only knows that field (then
    ``max_completion_tokens`` is not sent). ``timeout=`` is the SDK's per-request timeout.

    Args:
        client: ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (or an Azure client); an async
            client gives an :class:`AsyncSummarizer`.
        model: The model, e.g. ``"gpt-4o-mini"``.
        **params: More ``create()`` arguments (``temperature``, ``reasoning_effort``,
            ``timeout``, ``extra_headers``, …; checked against the client's ``create()`` signature).

    Returns:
        A :class:`Summarizer` or :class:`AsyncSummarizer` returning ``SummaryResponse(text,
        truncated=finish_reason == "length", usage=response.usage)``.

    Raises:
        TypeError: ``params`` sets a field the wrapper sets (``model``, ``messages``) or one a
            summary must not have (``tools``, ``stream``, …) or one the client's ``create()``
            does not take, or ``client`` has no Chat Completions.

    Example:
        >>> import openai
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import openai_chat
        >>> compactor = ContextCompactor(summarizer=openai_chat(openai.OpenAI(), "gpt-4o-mini"))
        >>> result = compactor.compact(messages)
    """
    _check_params("openai_chat", params, _OPENAI_RESERVED)
    create = _client_attr("openai_chat", client, "chat.completions.create")
    _check_signature("openai_chat", create, params)
    limit_given = bool(params.keys() & _TOKEN_LIMIT_KEYS)

    def arguments(request: SummaryRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": model, "messages": request.messages}
        if not limit_given:
            kw["max_completion_tokens"] = request.max_tokens
        kw.update(params)
        return kw

    details = _details(model, client, params)
    if _is_async(client, create):

        async def acall(request: SummaryRequest) -> SummaryResponse:
            return _openai_response(await create(**arguments(request)))

        return AsyncSummarizer("openai_chat", model, details, acall)

    def call(request: SummaryRequest) -> SummaryResponse:
        return _openai_response(create(**arguments(request)))

    return Summarizer("openai_chat", model, details, call)


# -- Anthropic SDK ------------------------------------------------------------------------------------


@overload
def anthropic_messages(
    client: AsyncAnthropic | AsyncAnthropicBedrock | AsyncAnthropicVertex, model: str, **params: Any
) -> AsyncSummarizer: ...
@overload
def anthropic_messages(
    client: Anthropic | AnthropicBedrock | AnthropicVertex, model: str, **params: Any
) -> Summarizer: ...
@overload
def anthropic_messages(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer: ...
def anthropic_messages(client: Any, model: str, **params: Any) -> Summarizer | AsyncSummarizer:
    """A summarizer that calls ``client.messages.create``.

    Sends ``model``, ``system=request.system_prompt``, one user message with
    ``request.user_prompt``, ``max_tokens=request.max_tokens`` and ``params``; never tools. The
    reply's text blocks are joined (thinking blocks are skipped); ``truncated`` is
    ``stop_reason == "max_tokens"`` (or ``"model_context_window_exceeded"``). Pass
    ``max_tokens=`` to override the cap (e.g. to leave room for ``thinking=``).

    Args:
        client: ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` (or a Bedrock / Vertex
            client); an async client gives an :class:`AsyncSummarizer`.
        model: The model, e.g. ``"claude-haiku-4-5"``.
        **params: More ``create()`` arguments (``thinking``, ``metadata``, ``timeout``,
            ``extra_body``, …; checked against the client's ``create()`` signature).

    Returns:
        A :class:`Summarizer` or :class:`AsyncSummarizer` returning ``SummaryResponse(text,
        truncated, usage=response.usage)``.

    Raises:
        TypeError: ``params`` sets ``model``, ``system``, ``messages``, ``tools``,
            ``tool_choice`` or ``stream``, or one the client's ``create()`` does not take, or
            ``client`` has no Messages API.

    Example:
        >>> import anthropic
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import anthropic_messages
        >>> summarize = anthropic_messages(anthropic.AsyncAnthropic(), "claude-haiku-4-5")
        >>> result = await ContextCompactor(summarizer=summarize).acompact(messages, system=system)
    """
    _check_params("anthropic_messages", params, _ANTHROPIC_RESERVED)
    create = _client_attr("anthropic_messages", client, "messages.create")
    _check_signature("anthropic_messages", create, params)

    def arguments(request: SummaryRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": model,
            "system": request.system_prompt,
            "messages": [{"role": "user", "content": request.user_prompt}],
            "max_tokens": request.max_tokens,
        }
        kw.update(params)
        return kw

    details = _details(model, client, params)
    if _is_async(client, create):

        async def acall(request: SummaryRequest) -> SummaryResponse:
            return _anthropic_response(await create(**arguments(request)))

        return AsyncSummarizer("anthropic_messages", model, details, acall)

    def call(request: SummaryRequest) -> SummaryResponse:
        return _anthropic_response(create(**arguments(request)))

    return Summarizer("anthropic_messages", model, details, call)


# -- OpenAI-compatible HTTP ---------------------------------------------------------------------------


class HTTPStatusError(Exception):
    """An OpenAI-compatible server answered with an HTTP error status.

    The compactor's failure ladder reads ``status_code``: 408/409/429/5xx fall back to the rule
    summary, 400/401/403/404/413/422 raise :class:`~context_compactor.SummarizerError` under
    ``on_summarizer_error="fallback"``. The API key is redacted from the message and the body.

    Attributes:
        status_code: The HTTP status.
        message: The server's error message (from ``{"error": {"message": ...}}``,
            ``{"error": "..."}`` or ``{"message": ...}``), else the start of the body.
        body: The reply body as text (at most 64 KiB).
        retry_after: Seconds from a ``retry-after-ms`` / ``retry-after`` header, if any.
        url: The URL asked, without credentials or query string.

    Example:
        >>> from context_compactor.summarizers import HTTPStatusError
        >>> e = HTTPStatusError(429, "slow down", url="http://127.0.0.1:8000/v1/chat/completions")
        >>> e.status_code, str(e)
        (429, 'HTTP 429 from http://127.0.0.1:8000/v1/chat/completions: slow down')
    """

    def __init__(
        self, status_code: int, message: str = "", *, body: str = "", retry_after: float | None = None, url: str = ""
    ) -> None:
        self.status_code = status_code
        self.message = message
        self.body = body
        self.retry_after = retry_after
        self.url = url
        where = f" from {url}" if url else ""
        super().__init__(f"HTTP {status_code}{where}: {message}" if message else f"HTTP {status_code}{where}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_http_status_error,
            (self.status_code, self.message, self.body, self.retry_after, self.url),
        )


def _rebuild_http_status_error(
    status_code: int, message: str, body: str, retry_after: float | None, url: str
) -> HTTPStatusError:
    return HTTPStatusError(status_code, message, body=body, retry_after=retry_after, url=url)


class ResponseFormatError(ValueError):
    """A server answered 2xx with something that is not a chat completion (not JSON, no choices).

    Example:
        >>> from context_compactor.summarizers import ResponseFormatError
        >>> isinstance(ResponseFormatError("the reply is not JSON"), ValueError)
        True
    """


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would re-send the Authorization header to the new host
    and turn the POST into a GET. A 3xx becomes an :class:`HTTPStatusError`."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    msg: Any = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            msg = err.get("message")
        elif isinstance(err, str):
            msg = err  # Ollama, llama.cpp
        if msg is None:
            msg = data.get("message") or data.get("detail")  # vLLM (older), FastAPI
    text = msg if isinstance(msg, str) and msg.strip() else body
    text = " ".join(text.split())
    return text[:297] + "..." if len(text) > 300 else text


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            continue
    return None


class _Endpoint:
    """One OpenAI-compatible chat endpoint: builds and sends the request (sync, blocking)."""

    def __init__(
        self,
        fn: str,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float,
        headers: Mapping[str, str] | None,
        params: dict[str, Any],
    ) -> None:
        if not isinstance(base_url, str):
            raise TypeError(f"{fn}(): base_url must be a str, got {type(base_url).__name__}")
        parts = urllib.parse.urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{fn}(): base_url must be an http:// or https:// URL like 'http://127.0.0.1:8000/v1'")
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"{fn}(): put credentials in api_key=, not in base_url")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
            raise ValueError(f"{fn}(): timeout must be a number of seconds > 0, got {timeout!r}")
        if api_key is not None and not isinstance(api_key, str):
            raise TypeError(f"{fn}(): api_key must be a str or None")
        _check_params(fn, params, _OPENAI_RESERVED)
        path = parts.path.rstrip("/") + "/chat/completions"
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        self.safe_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.safe_base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        self.model = model
        self.timeout = float(timeout)
        self._key = api_key or None
        self._params = params
        self._limit_given = bool(params.keys() & _TOKEN_LIMIT_KEYS)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"context-compactor/{_VERSION}",
            **dict(headers or {}),
        }
        if self._key:
            self._headers["Authorization"] = f"Bearer {self._key}"
        self._opener = urllib.request.build_opener(_NoRedirect)

    def details(self) -> str:
        parts = [f"model={self.model!r}", f"base_url={self.safe_base!r}"]
        if self._key:
            parts.append("api_key='***'")
        if self._params:
            parts.append(f"params={sorted(self._params)}")
        return ", ".join(parts)

    def body(self, request: SummaryRequest) -> bytes:
        payload: dict[str, Any] = {"model": self.model, "messages": request.messages, "stream": False}
        if not self._limit_given:
            payload["max_tokens"] = request.max_tokens
        payload.update(self._params)
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")

    def __call__(self, request: SummaryRequest) -> SummaryResponse:
        req = urllib.request.Request(self.url, data=self.body(request), headers=self._headers, method="POST")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read(_MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as e:
            raise self._status_error(e) from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                raise TimeoutError(f"timed out connecting to {self.safe_url} (timeout={self.timeout:g}s)") from None
            raise ConnectionError(f"cannot reach {self.safe_url}: {_redact(str(e.reason), self._key)}") from None
        except TimeoutError:
            raise TimeoutError(f"no reply from {self.safe_url} within timeout={self.timeout:g}s") from None
        except (http.client.HTTPException, OSError) as e:
            detail = _redact(str(e), self._key) or type(e).__name__
            raise ConnectionError(f"connection to {self.safe_url} failed: {detail}") from None
        if len(raw) > _MAX_BODY_BYTES:
            raise ResponseFormatError(f"the reply from {self.safe_url} is larger than {_MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(raw)
        except ValueError:
            raise ResponseFormatError(f"the reply from {self.safe_url} is not JSON") from None
        if not isinstance(data, dict):
            raise ResponseFormatError(f"the reply from {self.safe_url} is not a JSON object")
        if "choices" not in data and "error" in data:  # some servers answer 200 with an error
            message = _redact(_error_message(raw.decode("utf-8", "replace")), self._key)
            raise ResponseFormatError(f"the server answered with an error: {message}")
        reply = _openai_response(data)
        return SummaryResponse(_THINK_PREFIX.sub("", reply.text), reply.truncated, reply.usage)

    def _status_error(self, e: urllib.error.HTTPError) -> HTTPStatusError:
        try:
            raw = e.read(_MAX_ERROR_BODY_CHARS * 4)
        except Exception:
            raw = b""
        finally:
            e.close()
        body = _redact(raw.decode("utf-8", "replace")[:_MAX_ERROR_BODY_CHARS], self._key)
        message = _redact(_error_message(body), self._key) if body.strip() else (e.reason or "")
        return HTTPStatusError(e.code, str(message), body=body, retry_after=_retry_after(e.headers), url=self.safe_url)


async def _in_daemon_thread(fn: Callable[[SummaryRequest], SummaryResponse], arg: SummaryRequest) -> SummaryResponse:
    """``await fn(arg)`` run in a daemon thread.

    Not ``asyncio.to_thread``: its pool is joined when the loop closes, so a request abandoned at
    a timeout or cancellation would hold up ``asyncio.run()`` until the HTTP timeout.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[SummaryResponse] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if fut.done():  # cancelled or timed out meanwhile
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def run() -> None:
        try:
            result: Any = fn(arg)
            ok = True
        except BaseException as e:  # handed to the awaiting task
            result, ok = e, False
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(deliver, ok, result)

    threading.Thread(target=run, name="context-compactor-http", daemon=True).start()
    return await fut


def openai_compatible(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    timeout: float = 120.0,
    headers: Mapping[str, str] | None = None,
    **params: Any,
) -> Summarizer:
    """A summarizer for any OpenAI-compatible server, over plain HTTP (no SDK needed).

    ``POST {base_url}/chat/completions`` with ``model``, ``messages`` (system + user),
    ``max_tokens=request.max_tokens``, ``"stream": false`` and ``params``, and
    ``Authorization: Bearer {api_key}`` when a key is given. A leading ``<think>…</think>`` in
    the reply (reasoning models served without a reasoning parser) is dropped. Redirects are not
    followed; proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``) are used.

    The callable is synchronous: ``compact()`` calls it directly and ``acompact()`` runs it in
    a worker thread without blocking the event loop. To ``await`` it yourself, use
    :func:`async_openai_compatible`.

    Args:
        base_url: The server's OpenAI base URL, e.g. ``"http://127.0.0.1:8000/v1"`` (vLLM),
            ``"http://127.0.0.1:11434/v1"`` (Ollama), ``"http://127.0.0.1:8080/v1"`` (llama.cpp).
        model: The served model name.
        api_key: Sent as a Bearer token when given (vLLM ``--api-key``, hosted gateways).
        timeout: Seconds to connect and for each read (urllib's socket timeout; keep it at or
            below ``summarizer_timeout_s`` so an abandoned request ends soon after).
        headers: Extra request headers.
        **params: More request fields (``temperature``, ``top_p``, ``max_completion_tokens``, …);
            ``max_tokens=`` / ``max_completion_tokens=`` replace the default cap.

    Returns:
        A :class:`Summarizer`. Errors: :class:`HTTPStatusError` (``.status_code``) for an HTTP
        error status, ``TimeoutError``, ``ConnectionError``, :class:`ResponseFormatError`.

    Raises:
        ValueError: ``base_url`` is not an http(s) URL or holds credentials; bad ``timeout``.
        TypeError: ``params`` sets ``model``, ``messages``, ``stream`` or tools.

    Example:
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import openai_compatible
        >>> summarize = openai_compatible("http://127.0.0.1:11434/v1", "qwen2.5:7b", timeout=60)
        >>> compactor = ContextCompactor(summarizer=summarize, summarizer_timeout_s=60)
        >>> result = compactor.compact(messages)
    """
    endpoint = _Endpoint("openai_compatible", base_url, model, api_key, timeout, headers, params)
    return Summarizer("openai_compatible", model, endpoint.details(), endpoint)


def async_openai_compatible(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    timeout: float = 120.0,
    headers: Mapping[str, str] | None = None,
    **params: Any,
) -> AsyncSummarizer:
    """:func:`openai_compatible` as an ``async`` callable.

    The same request, run in a daemon thread so the event loop never blocks; cancelling (or an
    ``acompact`` timeout) returns at once and the abandoned request ends within ``timeout``.
    ``acompact()`` works as well with the sync :func:`openai_compatible`; this variant is for
    code that awaits the summarizer itself.

    Args:
        base_url: The server's OpenAI base URL, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: The served model name.
        api_key: Sent as a Bearer token when given.
        timeout: Seconds to connect and for each read.
        headers: Extra request headers.
        **params: More request fields, as for :func:`openai_compatible`.

    Returns:
        An :class:`AsyncSummarizer`.

    Example:
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.summarizers import async_openai_compatible
        >>> summarize = async_openai_compatible("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B-Instruct")
        >>> result = await ContextCompactor(summarizer=summarize).acompact(messages)
    """
    endpoint = _Endpoint("async_openai_compatible", base_url, model, api_key, timeout, headers, params)

    async def acall(request: SummaryRequest) -> SummaryResponse:
        return await _in_daemon_thread(endpoint, request)

    return AsyncSummarizer("async_openai_compatible", model, endpoint.details(), acall)
