"""WebSocketConnector connects at the vetted addresses only, keeping the URL's host for the
Host header, TLS SNI and the certificate check (real sockets on loopback).

`localhost` stands for a name an attacker controls: the system resolves it to 127.0.0.1,
where an "internal" server listens; 127.0.0.2 (also loopback on Linux) stands for the public
address the URL policy vetted. A connector that resolved the name again would reach the
internal server."""

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve

from adapters.websocket import WebSocketConnector, WebSocketOptions
from application.errors import UpstreamRejected, UpstreamUnavailable
from application.url_policy import UrlPolicy
from tests.support.tls import make_tls_files

VETTED, INTERNAL = "127.0.0.2", "127.0.0.1"


class Recorder:
    def __init__(self) -> None:
        self.hosts: list[str] = []  # the Host header of every handshake

    async def handler(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.hosts.append(ws.request.headers["Host"])
        await ws.send('{"seq": 1, "data": "hello"}')
        await ws.wait_closed()


@asynccontextmanager
async def pair(
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[tuple[int, Recorder, Recorder]]:
    """A vetted and an internal server on the same port of two loopback addresses."""
    vetted, internal = Recorder(), Recorder()
    for _ in range(20):  # the port chosen on 127.0.0.2 may be taken on 127.0.0.1
        async with AsyncExitStack() as stack:
            first: Server = await stack.enter_async_context(
                serve(vetted.handler, VETTED, 0, ssl=ssl_context)
            )
            port = first.sockets[0].getsockname()[1]
            try:
                await stack.enter_async_context(
                    serve(internal.handler, INTERNAL, port, ssl=ssl_context)
                )
            except OSError:
                continue
            yield port, vetted, internal
            return
    raise RuntimeError("no port free on both loopback addresses")


async def first_message(connector: WebSocketConnector, url: str, addresses: list[str]) -> str:
    """The first message's data field (the connector stores the whole frame)."""
    async with connector.open(url, 1, addresses) as stream:
        async for message in stream.messages():
            data: str = json.loads(message.data)["data"]
            return data
    raise AssertionError("no message")


async def test_the_connection_goes_to_the_vetted_address_not_where_the_name_points_now() -> None:
    async with pair() as (port, vetted, internal):
        data = await first_message(
            WebSocketConnector(WebSocketOptions(proxy=None)),
            f"ws://localhost:{port}/feed",
            [VETTED],
        )

    assert data == "hello"
    assert vetted.hosts == [f"localhost:{port}"]  # the original Host header
    assert internal.hosts == []


async def test_through_the_url_policy_a_rebinding_name_never_reaches_the_internal_server() -> None:
    """The session's path: vet (one resolution), then open at what was vetted. The resolver
    answers the stand-in public address first and 127.0.0.1 after, as a rebinding name does."""
    answers = [[VETTED], [INTERNAL]]

    class Rebinding:
        async def resolve(self, host: str) -> list[str]:
            return answers.pop(0) if len(answers) > 1 else answers[0]

    # allow_private: 127.0.0.2 plays the public address here (no test reaches the internet).
    policy = UrlPolicy(resolver=Rebinding(), allow_private=True)
    async with pair() as (port, vetted, internal):
        target = await policy.vet(f"ws://localhost:{port}/feed")
        await first_message(
            WebSocketConnector(WebSocketOptions(proxy=None)), target.url, list(target.addresses)
        )

    assert (len(vetted.hosts), internal.hosts) == (1, [])


async def test_tls_uses_the_urls_name_for_sni_and_verification_at_the_vetted_address(
    tmp_path: Path,
) -> None:
    """The certificate names `localhost` (not 127.0.0.2): verification must use the URL's
    host, and the server must be told that name (SNI)."""
    tls = make_tls_files(tmp_path)
    server_context = tls.server_context()
    sni: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: sni.append(name)
    connector = WebSocketConnector(WebSocketOptions(ca_file=str(tls.ca_file), proxy=None))
    async with pair(server_context) as (port, vetted, internal):
        data = await first_message(connector, f"wss://localhost:{port}/feed", [VETTED])

    assert data == "hello"
    assert sni == ["localhost"]
    assert (vetted.hosts, internal.hosts) == ([f"localhost:{port}"], [])


async def test_the_next_vetted_address_is_tried_when_one_refuses() -> None:
    async with pair() as (port, vetted, _):
        data = await first_message(
            WebSocketConnector(WebSocketOptions(proxy=None)),
            f"ws://localhost:{port}/feed",
            ["127.0.0.3", VETTED],  # nothing listens on 127.0.0.3
        )

    assert (data, len(vetted.hosts)) == ("hello", 1)


async def test_when_every_vetted_address_refuses_the_name_is_not_tried_instead() -> None:
    async with pair() as (port, vetted, internal):
        with pytest.raises(UpstreamUnavailable, match="cannot connect"):
            async with asyncio.timeout(5):
                await first_message(
                    WebSocketConnector(WebSocketOptions(proxy=None)),
                    f"ws://localhost:{port}/feed",
                    ["127.0.0.3"],
                )

    assert (vetted.hosts, internal.hosts) == ([], [])


async def test_no_vetted_address_is_a_rejection() -> None:
    with pytest.raises(UpstreamRejected, match="no vetted address"):
        await first_message(WebSocketConnector(WebSocketOptions(proxy=None)), "ws://h:9/", [])
