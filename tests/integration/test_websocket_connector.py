"""WebSocketConnector against the upstream simulator over real sockets on 127.0.0.1."""

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from adapters.websocket import (
    DefaultUpstreamHook,
    Send,
    UpstreamHook,
    WebSocketConnector,
    WebSocketOptions,
)
from application.errors import ConfigurationError, UpstreamRejected, UpstreamUnavailable
from application.ports import UpstreamConnector, UpstreamMessage
from entrypoints.simulator import UpstreamSimulator
from tests.support.simulator import simulator
from tests.support.tls import make_tls_files

__all__ = ["simulator"]

LOOPBACK = ("127.0.0.1",)  # what the URL policy vets for the simulator's URLs


async def read(
    connector: UpstreamConnector, url: str, from_seq: int, count: int
) -> list[UpstreamMessage]:
    """The first `count` messages from `from_seq` on (fewer if the stream ends)."""
    received: list[UpstreamMessage] = []
    async with connector.open(url, from_seq, LOOPBACK) as stream:
        async for message in stream.messages():
            received.append(message)
            if len(received) == count:
                break
    return received


def seqs(messages: list[UpstreamMessage]) -> list[int | None]:
    return [m.seq for m in messages]


async def test_reopening_from_the_next_seq_resumes_without_gap_or_duplicate(
    simulator: UpstreamSimulator,
) -> None:
    connector = WebSocketConnector()
    url = simulator.url("meeting")
    first = await read(connector, url, from_seq=1, count=10)
    second = await read(connector, url, from_seq=len(first) + 1, count=10)

    assert seqs(first + second) == list(range(1, 21))
    frames = [f'{{"seq":{n},"data":"meeting:{n}"}}' for n in range(11, 21)]
    assert [m.data for m in second] == frames  # whole, as the upstream sent them


async def test_resume_param_replaces_a_stale_one_and_keeps_other_query_params(
    simulator: UpstreamSimulator,
) -> None:
    url = simulator.url("q", from_seq=3, pad=1)  # a stale from_seq left in a stored URL
    messages = await read(WebSocketConnector(), url, from_seq=5, count=2)

    assert seqs(messages) == [5, 6]
    assert simulator.record("q")["connections"][0]["from_seq"] == 5


async def test_server_dropping_the_connection_raises_unavailable_and_reopen_resumes(
    simulator: UpstreamSimulator,
) -> None:
    connector = WebSocketConnector()
    url = simulator.url("drop")
    received: list[UpstreamMessage] = []

    async def read_until_dropped() -> None:
        async with connector.open(url, 1, LOOPBACK) as stream:
            async for message in stream.messages():
                received.append(message)
                if message.seq == 3:
                    assert simulator.drop_subscribers("drop") == 1

    with pytest.raises(UpstreamUnavailable, match="1006"):
        await read_until_dropped()
    resumed = await read(connector, url, from_seq=len(received) + 1, count=3)

    assert seqs(received + resumed) == list(range(1, len(received) + 4))


async def test_stream_ended_normally_by_the_upstream_ends_the_iterator(
    simulator: UpstreamSimulator,
) -> None:
    messages = await read(WebSocketConnector(), simulator.url("done", total=5), 1, count=100)

    assert seqs(messages) == [1, 2, 3, 4, 5]


async def test_end_stream_delivers_everything_due_then_ends_the_iterator(
    simulator: UpstreamSimulator,
) -> None:
    connector = WebSocketConnector()
    received: list[UpstreamMessage] = []
    async with connector.open(simulator.url("end"), 1, LOOPBACK) as stream:
        async for message in stream.messages():
            received.append(message)
            if message.seq == 2:
                simulator.end_stream("end")

    assert seqs(received) == list(range(1, simulator.emitted("end") + 1))


async def test_server_going_away_is_unavailable_not_an_end(simulator: UpstreamSimulator) -> None:
    async def read_until_restart() -> None:
        async with WebSocketConnector().open(simulator.url("restart"), 1, LOOPBACK) as stream:
            async for message in stream.messages():
                if message.seq == 2:
                    await simulator.stop()  # closes subscribers with 1001 going away

    with pytest.raises(UpstreamUnavailable, match="1001"):
        await read_until_restart()


async def test_refused_handshake_is_rejected(simulator: UpstreamSimulator) -> None:
    with pytest.raises(UpstreamRejected, match="HTTP 403"):
        await read(WebSocketConnector(), simulator.url("nope", path="refuse"), 1, count=1)


async def test_flaky_upstream_raises_unavailable(simulator: UpstreamSimulator) -> None:
    with pytest.raises(UpstreamUnavailable):
        await read(
            WebSocketConnector(), simulator.url("f", path="flaky", drop_after=0.2), 1, count=10**6
        )


async def test_handshake_5xx_is_unavailable() -> None:
    async with UpstreamSimulator(max_streams=1) as sim:
        sim.create_stream("only")
        with pytest.raises(UpstreamUnavailable, match="HTTP 503"):
            await read(WebSocketConnector(), sim.url("another"), 1, count=1)


async def test_unreachable_upstream_is_unavailable(simulator: UpstreamSimulator) -> None:
    port = simulator.port
    await simulator.stop()
    with pytest.raises(UpstreamUnavailable, match="cannot connect"):
        await read(WebSocketConnector(), f"ws://127.0.0.1:{port}/stream/x", 1, count=1)


@pytest.mark.parametrize("url", ["http://127.0.0.1/stream/x", "ws://[::1/stream/x", "ws://"])
async def test_invalid_url_is_rejected(url: str) -> None:
    with pytest.raises(UpstreamRejected, match="invalid URL"):
        await read(WebSocketConnector(), url, 1, count=1)


async def test_redirects_are_not_followed(simulator: UpstreamSimulator) -> None:
    """GIVEN an upstream answering 302 towards another host (here: the simulator)
    THEN the connector reports a rejection and never connects there: the URL policy vetted
    only the first host, so a redirect could reach an internal address."""

    def redirect(ws: ServerConnection, request: Request) -> Response:
        response = ws.respond(302, "moved\n")
        response.headers["Location"] = simulator.url("target")
        return response

    async with serve(lambda ws: ws.wait_closed(), "127.0.0.1", 0, process_request=redirect) as srv:
        port = srv.sockets[0].getsockname()[1]
        with pytest.raises(UpstreamRejected, match="HTTP 302"):
            await read(WebSocketConnector(), f"ws://127.0.0.1:{port}/x", 1, count=1)

    assert simulator.records() == {}


async def test_message_larger_than_max_size_is_rejected(simulator: UpstreamSimulator) -> None:
    connector = WebSocketConnector(WebSocketOptions(max_size=1024))
    assert len(await read(connector, simulator.url("small", pad=900), 1, count=2)) == 2
    with pytest.raises(UpstreamRejected, match="1009"):
        await read(connector, simulator.url("big", pad=2000), 1, count=1)


async def test_resume_point_older_than_the_replay_buffer_is_rejected() -> None:
    async with UpstreamSimulator(rate=200.0, buffer_size=5) as sim:
        sim.create_stream("old")
        await asyncio.sleep(0.1)  # about 20 seqs emitted: seq 1 left the 5-seq window
        with pytest.raises(UpstreamRejected, match="4410"):
            await read(WebSocketConnector(), sim.url("old"), 1, count=1)


async def test_wss_verifies_the_upstream_with_a_custom_ca_and_refuses_it_without(
    tmp_path: Path,
) -> None:
    tls = make_tls_files(tmp_path)
    async with UpstreamSimulator(rate=100.0, ssl_context=tls.server_context()) as sim:
        url = sim.url("secure")
        assert url.startswith("wss://")
        trusted = WebSocketConnector(WebSocketOptions(ca_file=str(tls.ca_file)))
        assert seqs(await read(trusted, url, 1, count=3)) == [1, 2, 3]

        with pytest.raises(UpstreamRejected, match="certificate verification failed"):
            await read(WebSocketConnector(), url, 1, count=1)


def test_options_refuse_invalid_settings() -> None:
    with pytest.raises(ConfigurationError, match="max_size"):
        WebSocketOptions(max_size=0)
    with pytest.raises(ConfigurationError, match="not both"):
        WebSocketOptions(ca_file="ca.pem", ssl_context=WebSocketOptions().build_ssl_context())
    with pytest.raises(ConfigurationError, match="ca_file"):
        WebSocketOptions(ca_file="/nonexistent/ca.pem").build_ssl_context()
    with pytest.raises(ConfigurationError, match="header"):
        WebSocketOptions(extra_headers={"X-Bad\r\n": "v"})


SECRETS = ("hunter22", "s3cr3t-token", "bearer-xyz-123")


async def test_credentials_never_reach_error_messages_or_logs(
    simulator: UpstreamSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # websockets logs request lines and headers at debug
    connector = WebSocketConnector(
        WebSocketOptions(extra_headers={"Authorization": "Bearer bearer-xyz-123"})
    )
    base = f"ws://alice:hunter22@127.0.0.1:{simulator.port}"
    await read(connector, f"{base}/stream/x?token=s3cr3t-token&room=7", 1, count=2)
    with pytest.raises(UpstreamRejected) as refused:
        await read(connector, f"{base}/refuse/x?token=s3cr3t-token", 1, count=1)
    with pytest.raises(UpstreamRejected) as invalid:
        await read(connector, "http://alice:hunter22@h/?api_key=s3cr3t-token", 1, count=1)

    client_logs = [
        r.getMessage() for r in caplog.records if not r.name.startswith("websockets.server")
    ]
    texts = [*client_logs, str(refused.value), str(invalid.value)]
    texts += [str(e.value.__cause__) for e in (refused, invalid)]
    assert "> GET /stream/x?token=***&room=7&from_seq=1" in caplog.text
    assert "ws://***@127.0.0.1" in str(refused.value)
    for secret in SECRETS:
        assert not any(secret in text for text in texts), secret


class RoomHook(DefaultUpstreamHook):
    """Subscribes with a frame, authenticates with a header, keeps only even seqs."""

    def headers(self, url: str) -> Mapping[str, str]:
        return {"X-Api-Key": "k-123456"}

    async def on_open(self, send: Send, from_seq: int) -> None:
        await send(f'{{"subscribe": "room", "from": {from_seq}}}')

    def parse(self, raw: str) -> UpstreamMessage | None:
        message = super().parse(raw)
        return message if message and message.seq and message.seq % 2 == 0 else None


async def test_hook_adds_headers_sends_a_subscribe_frame_and_parses_messages(
    simulator: UpstreamSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="websockets.client")
    hook: UpstreamHook = RoomHook()
    messages = await read(WebSocketConnector(hook=hook), simulator.url("room"), 1, count=3)

    await simulator.wait_for_subscribers("room", 0)
    assert seqs(messages) == [2, 4, 6]
    assert simulator.record("room")["connections"][0]["received"] == 1
    assert "> X-Api-Key: ***" in caplog.text
    assert "k-123456" not in caplog.text


async def test_unreadable_seq_is_rejected(simulator: UpstreamSimulator) -> None:
    connector = WebSocketConnector(WebSocketOptions(seq_field="data"))  # "room:1" is no seq
    with pytest.raises(UpstreamRejected, match="unreadable message"):
        await read(connector, simulator.url("bad-seq"), 1, count=1)


class BrokenHook(DefaultUpstreamHook):
    """A team's parser that fails on a frame with something other than ValueError."""

    def parse(self, raw: str) -> UpstreamMessage | None:
        raise KeyError("room")


async def test_any_exception_a_frame_makes_the_parser_raise_is_a_rejection(
    simulator: UpstreamSimulator,
) -> None:
    connector = WebSocketConnector(hook=BrokenHook())
    with pytest.raises(UpstreamRejected, match="unreadable message: KeyError: 'room'"):
        await read(connector, simulator.url("broken-hook"), 1, count=1)
