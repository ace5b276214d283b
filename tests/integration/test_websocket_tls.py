"""wss:// through WebSocketConnector with its small TLS read buffer, against the simulator
serving TLS with a test CA (real sockets on 127.0.0.1, certificate verification on)."""

import asyncio
from asyncio import sslproto
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.websocket import WebSocketConnector, WebSocketOptions
from adapters.websocket.options import (
    DEFAULT_TLS_READ_BUFFER,
    MAX_TLS_READ_BUFFER,
    MIN_TLS_READ_BUFFER,
)
from application.errors import ConfigurationError, UpstreamRejected, UpstreamUnavailable
from application.ports import UpstreamMessage
from entrypoints.simulator import UpstreamSimulator
from tests.support.simulator import simulator
from tests.support.tls import TlsFiles, make_tls_files

LOOPBACK = ("127.0.0.1",)  # what the URL policy vets for the simulator's URLs

__all__ = ["simulator"]

MAX_MESSAGE = 2**20  # the connector's default max_size


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path)


@pytest.fixture
async def secure_simulator(tls: TlsFiles) -> AsyncIterator[UpstreamSimulator]:
    async with UpstreamSimulator(rate=100.0, ssl_context=tls.server_context()) as sim:
        yield sim


def trusting(tls: TlsFiles, buffer: int = DEFAULT_TLS_READ_BUFFER) -> WebSocketConnector:
    # data_field="pad": the payload of each message is the simulator's padding, so its size
    # and content can be checked whole.
    options = WebSocketOptions(ca_file=str(tls.ca_file), data_field="pad", tls_read_buffer=buffer)
    return WebSocketConnector(options)


async def first(connector: WebSocketConnector, url: str, count: int) -> list[UpstreamMessage]:
    received: list[UpstreamMessage] = []
    async with connector.open(url, 1, LOOPBACK) as stream:
        async for message in stream.messages():
            received.append(message)
            if len(received) == count:
                break
    return received


def tls_read_buffer_size(transport: asyncio.BaseTransport) -> int | None:
    """Bytes one socket read may fill under `transport`, as asyncio's selector transport asks
    its protocol (`get_buffer(-1)`); None when it is not a TLS transport."""
    protocol: Any = getattr(transport, "_ssl_protocol", None)  # asyncio's TLS transport
    if not isinstance(protocol, sslproto.SSLProtocol):
        return None
    return len(protocol.get_buffer(-1))


async def buffer_in_use(connector: WebSocketConnector, url: str) -> int | None:
    async with connector.open(url, 1, LOOPBACK) as stream:
        return tls_read_buffer_size(stream._ws.transport)


async def test_the_tls_socket_reads_into_the_configured_buffer_not_asyncios_256_kib(
    tls: TlsFiles, secure_simulator: UpstreamSimulator
) -> None:
    url = secure_simulator.url("sized")
    assert await buffer_in_use(trusting(tls), url) == DEFAULT_TLS_READ_BUFFER == 4096
    assert await buffer_in_use(trusting(tls, 16384), url) == 16384
    # asyncio's own size is still there for whoever wants it (and the default it replaces)
    assert await buffer_in_use(trusting(tls, MAX_TLS_READ_BUFFER), url) == (256 * 1024)


@pytest.mark.parametrize("buffer", [MIN_TLS_READ_BUFFER, DEFAULT_TLS_READ_BUFFER])
async def test_messages_larger_than_the_buffer_arrive_whole_up_to_the_max_size(
    tls: TlsFiles, secure_simulator: UpstreamSimulator, buffer: int
) -> None:
    connector = trusting(tls, buffer)
    # A message is its padding plus ~100 bytes of JSON around it: the largest here is within
    # a few hundred bytes of max_size (the next test shows max_size itself is refused).
    for pad in (10, buffer - 1, buffer + 1, 5 * buffer + 17, MAX_MESSAGE - 400):
        url = secure_simulator.url(f"pad{pad}", pad=pad)
        messages = await first(connector, url, count=3)
        assert [m.seq for m in messages] == [1, 2, 3]
        assert all(m.data == "x" * pad for m in messages), pad


async def test_a_message_over_the_max_size_is_still_refused_with_the_small_buffer(
    tls: TlsFiles, secure_simulator: UpstreamSimulator
) -> None:
    url = secure_simulator.url("huge", pad=MAX_MESSAGE)
    with pytest.raises(UpstreamRejected, match="1009"):
        await first(trusting(tls, MIN_TLS_READ_BUFFER), url, count=1)


async def test_certificates_are_verified_with_the_small_buffer(
    secure_simulator: UpstreamSimulator,
) -> None:
    untrusting = WebSocketConnector(WebSocketOptions(tls_read_buffer=MIN_TLS_READ_BUFFER))
    with pytest.raises(UpstreamRejected, match="certificate verification failed"):
        await first(untrusting, secure_simulator.url("mitm"), count=1)


async def test_plain_ws_is_untouched(simulator: UpstreamSimulator) -> None:
    connector = WebSocketConnector(WebSocketOptions())
    async with connector.open(simulator.url("plain"), 1, LOOPBACK) as stream:
        assert tls_read_buffer_size(stream._ws.transport) is None
        assert (await anext(stream.messages())).seq == 1


@pytest.mark.parametrize("size", [MIN_TLS_READ_BUFFER - 1, MAX_TLS_READ_BUFFER + 1])
def test_a_buffer_size_out_of_range_is_refused_at_start_up(size: int) -> None:
    with pytest.raises(ConfigurationError, match="tls_read_buffer"):
        WebSocketOptions(tls_read_buffer=size)


async def test_a_configured_proxy_is_still_used_for_wss(
    tls: TlsFiles, secure_simulator: UpstreamSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lean path connects directly only when websockets would: with HTTPS_PROXY set (here a
    # closed port), the connection must go to the proxy and fail, not bypass it.
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    with pytest.raises(UpstreamUnavailable):
        await first(trusting(tls), secure_simulator.url("proxied"), count=1)
