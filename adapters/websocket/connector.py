"""WebSocketConnector: the upstream port on websockets' asyncio client.

One `open` is one connection attempt. There is no automatic reconnect (websockets'
`async for ... in connect()` loop is not used): reconnecting with back-off is the worker's job,
because it must keep renewing its lease, and give the connection up, while it retries.
"""

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidURI
from websockets.proxy import get_proxy
from websockets.uri import parse_uri

from adapters.websocket.errors import OPEN_ERRORS, closed_error, open_error
from adapters.websocket.hooks import DefaultUpstreamHook, UpstreamHook
from adapters.websocket.options import WebSocketOptions
from adapters.websocket.parsing import with_resume
from adapters.websocket.redact import (
    RedactingLogger,
    is_sensitive_name,
    redact_text,
    redact_url,
    url_secrets,
)
from adapters.websocket.tls_buffer import LeanTlsConnect
from application.errors import UpstreamRejected
from application.ports import UpstreamMessage

_log = logging.getLogger(__name__)


class _ConnectWithoutRedirects(LeanTlsConnect):
    def process_redirect(self, exc: Exception) -> Exception | str:
        # The URL policy vetted the host of this URL only: following a redirect could lead a
        # worker to an internal address (SSRF). A 3xx is reported as a rejection instead.
        return exc


class WebSocketStream:
    def __init__(
        self,
        ws: ClientConnection,
        url: str,
        parse: Callable[[str], UpstreamMessage | None],
        options: WebSocketOptions,
        secrets: Sequence[str] = (),
    ) -> None:
        self._ws = ws
        self._url = url
        self._parse = parse
        self._options = options
        self._secrets = secrets  # the URL's and the headers': masked in a close reason

    async def messages(self) -> AsyncIterator[UpstreamMessage]:
        while True:
            try:
                raw = await self._ws.recv(decode=True)
            except ConnectionClosed as exc:
                error = closed_error(
                    exc,
                    self._url,
                    self._options.normal_close_codes,
                    self._options.rejected_close_codes,
                    self._secrets,
                )
                if error is None:
                    _log.debug("upstream %s ended the stream", redact_url(self._url))
                    return
                raise error from exc
            except UnicodeDecodeError as exc:
                raise UpstreamRejected(
                    f"upstream {redact_url(self._url)} sent a binary frame that is not UTF-8 text"
                ) from exc
            try:
                message = self._parse(raw)
            except Exception as exc:
                # Whatever a frame makes the parser (a team's hook too) raise costs only this
                # connection, as an upstream fault with its back-off, never the session a crash.
                what = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                raise UpstreamRejected(
                    f"upstream {redact_url(self._url)} sent an unreadable message: {what:.300}"
                ) from exc
            if message is not None:
                yield message


class WebSocketConnector:
    """Opens upstream streams; see WebSocketOptions for the settings and UpstreamHook for the
    extension point (auth headers, a subscribe frame, the team's own message format)."""

    def __init__(
        self,
        options: WebSocketOptions | None = None,
        hook: UpstreamHook | None = None,
    ) -> None:
        self._options = options or WebSocketOptions()
        self._hook: UpstreamHook = hook or DefaultUpstreamHook(
            self._options.seq_field, self._options.data_field
        )
        self._ssl = self._options.build_ssl_context()

    @asynccontextmanager
    async def open(
        self, url: str, from_seq: int, addresses: Sequence[str]
    ) -> AsyncIterator[WebSocketStream]:
        options = self._options
        try:
            target = (
                with_resume(url, options.resume_param, from_seq) if options.resume_param else url
            )
            proxy = _proxy_for(target, options.proxy)
        except (ValueError, InvalidURI):  # urlsplit: a malformed host such as "[::1"
            raise UpstreamRejected(f"upstream {redact_url(url)}: invalid URL") from None
        headers = [*options.extra_headers, *self._hook.headers(url).items()]
        secrets = url_secrets(target) + [v for k, v in headers if is_sensitive_name(k)]
        ws = await self._connect(target, headers, secrets, proxy, addresses)
        _log.debug("upstream %s connected from seq %d", redact_url(target), from_seq)
        try:

            async def send(text: str) -> None:
                await ws.send(text)

            # A closure here is reported by the first read, classified like any other.
            with suppress(ConnectionClosed):
                await self._hook.on_open(send, from_seq)
            yield WebSocketStream(ws, target, self._hook.parse, options, secrets)
        finally:
            await _close(ws)

    async def _connect(
        self,
        target: str,
        headers: list[tuple[str, str]],
        secrets: list[str],
        proxy: str | None,
        addresses: Sequence[str],
    ) -> ClientConnection:
        """Connect at the vetted addresses, in order, until one accepts the TCP connection.
        The URL keeps its host: it is the Host header, the TLS server name (SNI) and the name
        the certificate is verified against; only the socket goes to the vetted address.
        Through a proxy the proxy resolves the name: it is then the egress control."""
        options = self._options
        tls: dict[str, Any] = {"ssl": self._ssl} if target.lower().startswith("wss:") else {}
        if proxy is None and not addresses:
            raise UpstreamRejected(f"upstream {redact_url(target)}: no vetted address to open")
        pins: list[dict[str, Any]] = (
            [{"host": address} for address in addresses] if proxy is None else [{}]
        )
        for attempt, pin in enumerate(pins, start=1):
            try:
                return await _ConnectWithoutRedirects(
                    target,
                    additional_headers=headers,
                    compression=options.compression,
                    open_timeout=options.open_timeout,
                    ping_interval=options.ping_interval,
                    ping_timeout=options.ping_timeout,
                    close_timeout=options.close_timeout,
                    max_size=options.max_size,
                    max_queue=options.max_queue,
                    user_agent_header=options.user_agent,
                    proxy=proxy,
                    logger=RedactingLogger(logging.getLogger("websockets.client"), secrets),
                    tls_read_buffer=options.tls_read_buffer,
                    **tls,
                    **pin,
                )
            except OPEN_ERRORS as exc:
                if attempt < len(pins) and _unreachable(exc):
                    continue  # this address refused or is unreachable: try the next one
                error = open_error(exc, target)
                _log.debug("%s", error)
                # The library's message may quote the URL: chain it only when it holds no secret.
                cause = exc if redact_text(str(exc), secrets) == str(exc) else None
                raise error from cause
        raise AssertionError("unreachable: the last attempt returns or raises")


def _proxy_for(target: str, setting: str | bool | None) -> str | None:
    """The proxy this URL goes through, if any (True: the environment's, NO_PROXY applied)."""
    if setting is True:
        return get_proxy(parse_uri(target))
    return setting or None


def _unreachable(exc: Exception) -> bool:
    """A failure to reach this address at all (refused, unreachable), where another of the
    host's addresses may work; TLS, handshake and timeout failures are not retried."""
    return isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError | TimeoutError)


async def _close(ws: ClientConnection) -> None:
    """Leave the upstream now, whatever state the connection is in.

    The closing handshake needs the upstream's close frame, which arrives behind the messages
    it sent after we stopped listening; once those fill the receive queue (`max_queue`),
    websockets stops reading and `close()` waits out `close_timeout`. So the unread messages
    are discarded while closing: they belong to whoever streams this connection next. And a
    close interrupted by cancellation (a session ending while it closed) aborts the TCP
    connection instead of leaving it open until the upstream's own timeout (10 s measured):
    a stale subscriber that still looks connected can confuse, or be refused by, the upstream
    when the new owner subscribes."""

    async def discard_unread() -> None:
        with suppress(ConnectionClosed):
            async for _ in ws:
                pass

    drain = asyncio.create_task(discard_unread())
    try:
        await ws.close()
    finally:
        ws.transport.abort()  # nothing left to do after a completed close; at once otherwise
        drain.cancel()
        await asyncio.gather(drain, return_exceptions=True)
