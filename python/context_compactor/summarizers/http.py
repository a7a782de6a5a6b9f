"""Any OpenAI-compatible HTTP server, with the standard library only: :func:`openai_compatible`
and :func:`async_openai_compatible` (``POST {base_url}/chat/completions`` with ``max_tokens``).

Why a hand-written HTTP client stays (LAYOUT-REVIEW, improvement 7): the CLI's
``--summarizer-url`` must work with nothing extra installed (``pip install context-compactor``
and a local vLLM, Ollama, llama.cpp or LM Studio server), and the package depends on no HTTP
library. ``urllib`` covers what a summary call needs: one POST, a timeout, no redirects (the
``Authorization`` header is never re-sent to another host), a bounded body read, keys redacted
from every error. The async variant runs the same call in a daemon thread (a hung server never
blocks the event loop or the interpreter's exit). Users who want a connection pool, HTTP/2 or
retries pass their own client through :func:`~context_compactor.summarizers.openai_chat`
(``openai.OpenAI(base_url=...)``) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from context_compactor.results import SummaryRequest, SummaryResponse
from context_compactor.summarizers._base import (
    _TOKEN_LIMIT_KEYS,
    AsyncSummarizer,
    ResponseFormatError,
    Summarizer,
    _check_params,
    _openai_response,
)
from context_compactor.summarizers.openai import _OPENAI_RESERVED

__all__ = ["HTTPStatusError", "async_openai_compatible", "openai_compatible"]

#: At most this much of a reply body is read (a summary is a few KiB).
_MAX_BODY_BYTES = 16 * 1024 * 1024
#: At most this much of an error body is kept on :class:`HTTPStatusError`.
_MAX_ERROR_BODY_CHARS = 64 * 1024

try:  # the package version for the User-Agent header of openai_compatible
    from context_compactor._core import __version__ as _VERSION
except Exception:  # pragma: no cover - only without the native module
    _VERSION = "unknown"


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
        # A reasoning model's leading <think> block is left to the core (`summary/reply.rs`
        # `strip_think`), which reads every summarizer's reply the same way.
        return SummaryResponse(reply.text, reply.truncated, reply.usage)

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
        >>> import asyncio
        >>> base_url                                        # a vLLM, Ollama or llama.cpp server
        'http://127.0.0.1:.../v1'
        >>> summarize = async_openai_compatible(base_url, "Qwen/Qwen2.5-7B-Instruct")
        >>> result = asyncio.run(ContextCompactor(max_context_tokens=3_000, summarizer=summarize).acompact(messages))
        >>> result.summary_source
        'llm'
    """
    endpoint = _Endpoint("async_openai_compatible", base_url, model, api_key, timeout, headers, params)

    async def acall(request: SummaryRequest) -> SummaryResponse:
        return await _in_daemon_thread(endpoint, request)

    return AsyncSummarizer("async_openai_compatible", model, endpoint.details(), acall)
