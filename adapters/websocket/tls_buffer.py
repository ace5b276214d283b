"""wss:// with a smaller TLS read buffer than asyncio's: 4 KiB instead of 256 KiB.

asyncio's TLS layer (`asyncio.sslproto.SSLProtocol`, the same code in CPython 3.11, 3.12 and
3.13) gives every connection a socket read buffer of `max_size` bytes, a class attribute
(256 KiB), allocated and zero-filled when the connection is made and kept for its whole life;
it also reads decrypted data in chunks of `max_size`. At 1 message/s per connection the buffer
holds a few hundred bytes a second: 10,000 connections pinned 2.5 GiB of it (bench/RESULTS.md,
section 3b). Shrinking it after the handshake is not enough: the 256 KiB blocks freed by
thousands of handshakes leave the heap fragmented (measured: ~130 KiB per connection stays
resident), so the buffer must be small from the start.

`loop.create_connection(ssl=...)` always builds the stock class. So for a direct wss://
connection `LeanTlsConnect` does what asyncio does inside it, with its own subclass: the TLS
protocol wraps websockets' connection and sits on a plain TCP transport, and the connection is
returned once the TLS handshake (certificate verification included, the same SSLContext) is
done. Only the buffer size differs; the class attribute is set on a subclass made here, never
on asyncio's class, so nothing else in the process changes. In 3.11-3.13 `max_size` is read in
exactly three places: `__init__` (the buffer), `get_buffer` (the most one socket read may
return) and `_do_read__copied` (the most one decrypted read returns). None bounds a message:
bytes go from the buffer into the TLS object's memory BIO at once, OpenSSL reassembles records
from there and websockets reassembles frames, so a large message takes more, smaller reads.

Through an HTTP or SOCKS proxy (websockets' own path, `loop.start_tls`) the connection keeps
asyncio's 256 KiB buffer.
"""

import asyncio
import functools
import ssl
from asyncio import sslproto
from typing import Any, cast

from websockets.asyncio.client import ClientConnection, connect
from websockets.proxy import get_proxy

from adapters.websocket.options import DEFAULT_TLS_READ_BUFFER

_TLS_ONLY = ("ssl", "server_hostname", "ssl_handshake_timeout", "ssl_shutdown_timeout")


@functools.cache
def tls_protocol_class(read_buffer: int) -> type[sslproto.SSLProtocol]:
    """asyncio's TLS protocol with a `read_buffer`-byte read buffer (one class per size)."""
    return cast(
        type[sslproto.SSLProtocol],
        type(f"SSLProtocol{read_buffer}", (sslproto.SSLProtocol,), {"max_size": read_buffer}),
    )


class LeanTlsConnect(connect):
    """websockets' `connect`, opening direct wss:// connections on `tls_protocol_class`."""

    def __init__(
        self, uri: str, *, tls_read_buffer: int = DEFAULT_TLS_READ_BUFFER, **kwargs: Any
    ) -> None:
        self.tls_read_buffer = tls_read_buffer
        super().__init__(uri, **kwargs)

    def _direct(self, kwargs: dict[str, Any]) -> bool:
        """True when websockets would connect straight to the server (no proxy)."""
        if kwargs.get("unix"):
            return False
        if kwargs.get("sock") is not None:
            return True
        return self.proxy is None or (self.proxy is True and get_proxy(self.ws_uri) is None)

    async def open_tcp_connection(self) -> ClientConnection:
        kwargs = dict(self.create_connection_kwargs)
        context = kwargs.get("ssl")
        if not isinstance(context, ssl.SSLContext) or not self._direct(kwargs):
            return await super().open_tcp_connection()  # ws://, or through a proxy
        tls_kwargs = {name: kwargs.pop(name, None) for name in _TLS_ONLY}
        if kwargs.get("sock") is None:
            kwargs.setdefault("host", self.ws_uri.host)
            kwargs.setdefault("port", self.ws_uri.port)
        loop = asyncio.get_running_loop()
        connection = self.factory(self.ws_uri)
        handshake: asyncio.Future[None] = loop.create_future()
        tls = tls_protocol_class(self.tls_read_buffer)(
            loop,
            connection,
            context,
            handshake,
            server_hostname=tls_kwargs["server_hostname"] or self.ws_uri.host,
            ssl_handshake_timeout=tls_kwargs["ssl_handshake_timeout"],
            ssl_shutdown_timeout=tls_kwargs["ssl_shutdown_timeout"],
        )
        transport, _ = await loop.create_connection(lambda: tls, **kwargs)
        try:
            await handshake  # the TLS protocol calls connection.connection_made before this
        except BaseException:
            transport.abort()
            raise
        return connection
