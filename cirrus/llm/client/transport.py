"""The HTTP transport under the OpenAI SDK: ``aiohttp`` by default, the SDK's
own ``httpx`` one on request (``CIRRUS_HTTP_TRANSPORT=httpx``).

Why aiohttp: at 64 requests in flight the SDK's httpx transport spends about
twice the CPU per call, its connection pool re-scanning every connection on
every event (benchmarks/results/eval_cpu.md).  The SDK ships the aiohttp
transport (``openai[aiohttp]``, :class:`openai.DefaultAioHttpClient`); both
send the same request bytes (tests/test_wire_bytes.py).

What this module adds to the SDK's transport: errors named as they are.  The
SDK's aiohttp transport turns every aiohttp connection error into a *connect
timeout* (so a refused connection, a reset or a server that hangs up would be
reported, and retried, as "timed out").  Here each keeps its kind: a refused or
unreachable address is a connect error, a server that closed the connection a
protocol error, a body cut short a read error, and only a real timeout a
timeout; the original aiohttp error stays the cause.
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from openai import DefaultAioHttpClient
from openai._httpx2 import http_response_types  # the SDK's httpx fork (httpx2) under its public names

TRANSPORT_ENV = "CIRRUS_HTTP_TRANSPORT"
TRANSPORTS = ("aiohttp", "httpx")

_RESPONSE = http_response_types()[0]  # the SDK's response class (httpx2's)
_httpx = sys.modules[_RESPONSE.__module__.split(".")[0]]  # httpx2, as the SDK imports it


def http_transport() -> str:
    """The transport chosen by ``CIRRUS_HTTP_TRANSPORT`` (``aiohttp``, the
    default, or ``httpx``); any other value is an error that lists both."""
    name = os.environ.get(TRANSPORT_ENV, "").strip().lower() or TRANSPORTS[0]
    if name not in TRANSPORTS:
        raise ValueError(f"{TRANSPORT_ENV}={name!r} is not a transport Cirrus knows: use one of "
                         f"{', '.join(TRANSPORTS)}")
    return name


# most specific first: the first class the aiohttp error is an instance of decides
_KINDS: tuple[tuple[type[BaseException], type[Exception]], ...] = (
    (aiohttp.ConnectionTimeoutError, _httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, _httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, _httpx.ReadTimeout),
    (aiohttp.ClientProxyConnectionError, _httpx.ProxyError),
    (aiohttp.ClientHttpProxyError, _httpx.ProxyError),
    (aiohttp.ClientConnectorError, _httpx.ConnectError),  # refused, unreachable, name not resolved
    (aiohttp.ServerDisconnectedError, _httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, _httpx.ReadError),
    (aiohttp.ClientConnectionError, _httpx.ReadError),  # reset, broken pipe, ...
)


def _named(cause: BaseException) -> type[Exception] | None:
    """The httpx2 error an aiohttp error really is (None: not one of :data:`_KINDS`)."""
    return next((named for kind, named in _KINDS if isinstance(cause, kind)), None)


def renamed(error: Exception) -> Exception:
    """``error`` (an httpx2 error the SDK's aiohttp transport raised) as the
    httpx2 error its aiohttp cause really is; unchanged when it is right."""
    cause = error.__cause__
    named = _named(cause) if isinstance(cause, aiohttp.ClientError) else None
    if named is None or type(error) is named:
        return error
    better = named(str(error))
    better.__cause__ = cause
    return better


class _Body(_httpx.AsyncByteStream):  # type: ignore[misc,name-defined]
    """A response body whose read errors are :func:`renamed`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except _httpx.TransportError as exc:
            raise renamed(exc) from exc.__cause__

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        except _httpx.TransportError as exc:
            raise renamed(exc) from exc.__cause__


def _named_errors(transport: Any) -> Any:
    """Wrap ``transport.handle_async_request`` so that its errors, and those
    of the bodies it returns, are :func:`renamed`."""
    send = transport.handle_async_request

    async def handle_async_request(request: Any) -> Any:
        try:
            response = await send(request)
        except _httpx.TransportError as exc:
            raise renamed(exc) from exc.__cause__
        response.stream = _Body(response.stream)
        return response

    transport.handle_async_request = handle_async_request
    return transport


class AioHttpClient(DefaultAioHttpClient):  # type: ignore[misc,valid-type]
    """The SDK's aiohttp client (its defaults: timeout, connection limits,
    redirects), with errors named as they are."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
        self.aiohttp_transport = _named_errors(super()._init_transport(*args, **kwargs))
        return self.aiohttp_transport

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _named_errors(super()._init_proxy_transport(*args, **kwargs))


def http_client_options(timeout: float, base_url: str) -> dict[str, Any]:
    """Keyword arguments for ``AsyncOpenAI`` that put it on the chosen
    transport (none for the SDK's own).  A base URL with credentials in it
    (``https://user:pass@gateway/v1``) stays on httpx, which sends them as
    the SDK always has; aiohttp refuses a URL's credentials beside the
    ``Authorization`` header."""
    from urllib.parse import urlsplit

    if http_transport() == "aiohttp" and "@" not in urlsplit(base_url).netloc:
        return {"http_client": AioHttpClient(timeout=timeout)}
    return {}


class ChatPoster:
    """Posts chat-completion bodies for one ``AsyncOpenAI`` client.

    The first request goes through the SDK, which builds it (URL, headers,
    auth); every later one sends the *same* request line and headers with its
    own body straight over the SDK's aiohttp session, skipping the SDK's
    per-request building (options copied, headers merged and validated, URL
    parsed, an httpx request and response made), which costs more CPU than
    the rest of a call (issue 28; benchmarks/results/eval_cpu.md).  What comes
    back is what the SDK path gives: a 2xx JSON object as a ``dict``, any
    other answer read by ``read`` from an httpx response built as the SDK
    builds it, the SDK's own status errors
    (``_make_status_error_from_response``), ``APIConnectionError`` or
    ``APITimeoutError`` raised from the transport error whose cause is the
    aiohttp one.  The SDK path is kept wherever the shortcut could differ: the
    httpx transport, a client Cirrus did not make, a proxy in the environment,
    a redirect."""

    def __init__(self, openai_client: Any, read: Callable[[Any], Any]) -> None:
        self._openai = openai_client
        self._read = read
        http = getattr(openai_client, "_client", None)
        transport = getattr(http, "aiohttp_transport", None)
        self._transport = transport if isinstance(http, AioHttpClient) and not _proxied() else None
        self._request: Any = None  # the first request the SDK built: the template of the later ones
        self._url = ""
        self._headers: list[tuple[str, str]] = []
        self._timeout: aiohttp.ClientTimeout | None = None

    async def post(self, payload: bytes) -> Any:
        session = self._transport.client if self._transport is not None else None
        if self._request is None or not isinstance(session, aiohttp.ClientSession) or session.closed:
            return await self._sdk_post(payload)
        try:
            async with session.request("POST", self._url, headers=self._headers, data=payload,
                                       auto_decompress=False, compress=False, timeout=self._timeout,
                                       allow_redirects=False) as answer:
                body = await answer.read()
        except aiohttp.ClientError as exc:
            raise self._transport_error(exc)  # noqa: B904 - its cause is set: the httpx error, then aiohttp's
        if 300 <= answer.status < 400:
            return await self._sdk_post(payload)  # a redirect: the SDK's client follows it
        content_type = answer.headers.get("content-type", "")
        if answer.status < 300 and content_type.split(";")[0].endswith("json") \
                and not answer.headers.get("content-encoding"):
            data = json.loads(body)
            if isinstance(data, dict):
                return data
        response = _RESPONSE(status_code=answer.status, headers=answer.raw_headers, content=body,
                             request=self._request)
        if answer.status >= 400:
            raise self._openai._make_status_error_from_response(response)
        return self._read(response)

    async def _sdk_post(self, payload: bytes) -> Any:
        response = await self._openai.post("/chat/completions", cast_to=_RESPONSE, content=payload)
        if self._request is None and self._transport is not None and 200 <= response.status_code < 300 \
                and response.request.url.path.endswith("/chat/completions"):
            self._learn(response.request)
        return self._read(response)

    def _learn(self, request: Any) -> None:
        self._request = request
        self._url = str(request.url)
        skip = {"host", "content-length", "transfer-encoding"}  # aiohttp writes these for each request
        self._headers = [(name, value) for name, value in request.headers.multi_items() if name.lower() not in skip]
        timeout = request.extensions.get("timeout", {})
        self._timeout = aiohttp.ClientTimeout(sock_connect=timeout.get("connect"), sock_read=timeout.get("read"),
                                              connect=timeout.get("pool"))

    def _transport_error(self, exc: aiohttp.ClientError) -> Exception:
        """The SDK's error for a failed send: a timeout or a connection
        error, raised from the httpx error the aiohttp one is (its cause)."""
        from openai import APIConnectionError, APITimeoutError

        error = (_named(exc) or _httpx.ReadError)(str(exc))
        error.__cause__ = exc
        sdk_error = (APITimeoutError(request=self._request) if isinstance(error, _httpx.TimeoutException)
                     else APIConnectionError(request=self._request))
        sdk_error.__cause__ = error
        return sdk_error


_POSTERS: weakref.WeakKeyDictionary[Any, ChatPoster] = weakref.WeakKeyDictionary()


def poster_for(openai_client: Any, read: Callable[[Any], Any]) -> ChatPoster:
    """The :class:`ChatPoster` of ``openai_client``: one per client, so the
    clients of a pool that share an ``AsyncOpenAI`` learn its request once."""
    try:
        return _POSTERS[openai_client]
    except (KeyError, TypeError):
        poster = ChatPoster(openai_client, read)
        try:
            _POSTERS[openai_client] = poster
        except TypeError:  # an object that takes no weak reference (a test double): its own poster each time
            pass
        return poster


def _proxied() -> bool:
    """Whether the environment names a proxy (the SDK's client mounts one)."""
    import urllib.request

    return bool(urllib.request.getproxies())

