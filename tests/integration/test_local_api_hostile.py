"""The local event API against hostile clients, over raw sockets on 127.0.0.1: sockets that
never finish a request, a body far over the limit, Content-Length values that are not
numbers aiohttp or we could use."""

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from entrypoints.api import MAX_BODY_BYTES, EventApi
from entrypoints.cli.api_server import LocalApiServer
from entrypoints.containers import provide, shutdown
from entrypoints.embedded import EmbeddedContainer
from entrypoints.settings import load_settings

HEAD = "Host: localhost\r\nContent-Type: application/json\r\n"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LocalApiServer]:
    """The API as `wsfleet api` runs it: default cap (64 sockets) and deadlines."""
    container = EmbeddedContainer(settings=load_settings({"WSFLEET_DATA_DIR": str(tmp_path)}))
    api: EventApi = await provide(container.core.api)
    local = LocalApiServer(api, "127.0.0.1", 0)
    await local.start()
    try:
        yield local
    finally:
        await local.close()
        await shutdown(container)


async def exchange(port: int, raw: bytes) -> tuple[int, Any]:
    """Send `raw`, read the answer to the end; (0, None) if the socket closed or reset
    without one."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        async with asyncio.timeout(10):
            response = await reader.read()
    except ConnectionError:
        return 0, None
    finally:
        writer.close()
    if not response:
        return 0, None
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_real_requests_are_served_while_64_sockets_sit_idle_or_trickle(
    server: LocalApiServer,
) -> None:
    """GIVEN 64 sockets that fill the cap, half silent, half sending a request line and
    then nothing, WHEN real requests arrive, THEN each is served (idle sockets give way)."""
    idle = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(64)]
    for _, writer in idle[::2]:
        writer.write(b"GET /connections/x HTTP/1.1\r\n")
    await asyncio.sleep(0.3)

    served = [
        (await exchange(server.port, f"GET /connections/x HTTP/1.1\r\n{HEAD}\r\n".encode()))[0]
        for _ in range(4)
    ]

    for _, writer in idle:
        writer.close()
    assert served == [404, 404, 404, 404]


async def test_a_2_mib_body_gets_a_413_the_client_receives(server: LocalApiServer) -> None:
    body = b"x" * (2 * 1024 * 1024)
    head = f"POST /events HTTP/1.1\r\n{HEAD}Content-Length: {len(body)}\r\n\r\n".encode()

    status, answer = await exchange(server.port, head + body)

    assert status == 413
    assert answer["error"] == "payload_too_large"
    assert str(MAX_BODY_BYTES) in answer["message"]


@pytest.mark.parametrize("length", ["\u00b2", "9" * 5000, "-1", "1e3", "0x10"])
async def test_a_content_length_that_is_no_number_is_answered_400_and_logs_no_error(
    server: LocalApiServer, length: str, caplog: pytest.LogCaptureFixture
) -> None:
    raw = f"POST /events HTTP/1.1\r\n{HEAD}Content-Length: {length}\r\n\r\n{{}}"

    with caplog.at_level(logging.DEBUG):
        status, answer = await exchange(server.port, raw.encode("latin-1"))  # ² as one byte
        await asyncio.sleep(0.1)  # whatever the server logs after answering

    assert status == 400
    assert answer["error"] == "invalid_request"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
