"""The parts of websockets (and of asyncio's TLS layer) that the upstream adapter subclasses or
hooks, beyond their documented use: `LeanTlsConnect` overrides `connect.open_tcp_connection`
and reads the attributes `connect.__init__` sets; `_ConnectWithoutRedirects` overrides
`connect.process_redirect`; `tls_protocol_class` subclasses `asyncio.sslproto.SSLProtocol`.

The lock pins websockets, the base image pins Python; these tests say what a new version of
either must still have. Each fails with the name of what changed, before the behaviour tests
(tests/integration/test_websocket_tls.py, the redirect test of test_websocket_connector.py)
fail in a way that is harder to read, or pass while the override is no longer called."""

import asyncio
import inspect
import ssl
from asyncio import sslproto
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.http11 import Response
from websockets.proxy import get_proxy
from websockets.uri import WebSocketURI, parse_uri

from adapters.websocket.connector import _ConnectWithoutRedirects
from adapters.websocket.options import WebSocketOptions
from adapters.websocket.tls_buffer import LeanTlsConnect, tls_protocol_class

# What adapters/websocket/connector.py passes to the connect class, by name.
CONNECT_KEYWORDS = {
    "additional_headers", "compression", "open_timeout", "ping_interval", "ping_timeout",
    "close_timeout", "max_size", "max_queue", "user_agent_header", "proxy", "logger",
}  # fmt: skip


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_connect_is_still_a_class_taking_our_keywords_and_passing_the_rest_to_the_socket() -> None:
    assert inspect.isclass(connect)
    assert issubclass(_ConnectWithoutRedirects, LeanTlsConnect)
    assert issubclass(LeanTlsConnect, connect)
    parameters = inspect.signature(connect.__init__).parameters
    assert set(parameters) >= CONNECT_KEYWORDS, CONNECT_KEYWORDS - set(parameters)
    # host (the vetted address), ssl and server_hostname go on to loop.create_connection.
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def test_connect_keeps_the_attributes_open_tcp_connection_reads() -> None:
    context = ssl.create_default_context()
    opener = LeanTlsConnect("wss://feeds.example.com:8443/x", ssl=context, host="192.0.2.1")

    assert isinstance(opener.ws_uri, WebSocketURI)
    assert (opener.ws_uri.host, opener.ws_uri.port, opener.ws_uri.secure) == (
        "feeds.example.com",
        8443,
        True,
    )
    assert opener.proxy is True  # the default: the environment's proxy, which _direct asks
    assert opener.create_connection_kwargs == {"ssl": context, "host": "192.0.2.1"}
    assert _parameters(opener.factory) == ["uri"]


def test_the_hooks_we_override_keep_their_signatures() -> None:
    assert inspect.iscoroutinefunction(connect.open_tcp_connection)
    assert _parameters(connect.open_tcp_connection) == ["self"]
    assert _parameters(connect.process_redirect) == ["self", "exc"]
    assert _parameters(get_proxy) == ["uri"]
    assert isinstance(parse_uri("wss://feeds.example.com/"), WebSocketURI)


async def test_connect_opens_through_open_tcp_connection_and_asks_process_redirect() -> None:
    """GIVEN a connect whose open_tcp_connection returns a connection answering 302
    THEN websockets opens through that method and asks process_redirect before following."""
    redirect = InvalidStatus(Response(302, "Found", Headers({"Location": "ws://elsewhere/"})))
    seen: list[Exception] = []

    class Refused:
        transport = type("Transport", (), {"abort": lambda self: None})()

        async def handshake(self, *args: object) -> None:
            raise redirect

    class Probe(_ConnectWithoutRedirects):
        async def open_tcp_connection(self) -> Any:
            return Refused()

        def process_redirect(self, exc: Exception) -> Exception | str:
            seen.append(exc)
            return super().process_redirect(exc)

    with pytest.raises(InvalidStatus):
        await Probe("ws://feeds.example.com/", open_timeout=5)
    assert seen == [redirect]  # asked once, and the refusal is raised, not followed


class _QuietTransport(asyncio.Transport):
    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


async def test_the_factory_makes_an_asyncio_protocol_with_a_transport() -> None:
    opener = LeanTlsConnect("wss://feeds.example.com/", ssl=ssl.create_default_context())
    connection = opener.factory(opener.ws_uri)

    assert isinstance(connection, ClientConnection)
    assert isinstance(connection, asyncio.Protocol)  # what SSLProtocol wraps as app_protocol
    # The TLS protocol hands it its transport; _close aborts `ws.transport` to leave at once.
    transport = _QuietTransport()
    connection.connection_made(transport)
    assert connection.transport is transport


async def test_asyncios_tls_protocol_still_sizes_its_buffer_from_the_max_size_attribute() -> None:
    assert isinstance(sslproto.SSLProtocol.max_size, int)
    assert {"loop", "app_protocol", "sslcontext", "waiter", "server_hostname"} <= set(
        _parameters(sslproto.SSLProtocol.__init__)
    )
    assert {"ssl_handshake_timeout", "ssl_shutdown_timeout"} <= set(
        _parameters(sslproto.SSLProtocol.__init__)
    )
    loop = asyncio.get_running_loop()
    size = WebSocketOptions().tls_read_buffer
    waiter: asyncio.Future[None] = loop.create_future()
    tls = tls_protocol_class(size)(
        loop, asyncio.Protocol(), ssl.create_default_context(), waiter, server_hostname="x"
    )

    assert len(tls.get_buffer(-1)) == size  # allocated small, not 256 KiB shrunk later
