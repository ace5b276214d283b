"""The local event API (`wsfleet api`) over real sockets, on the embedded backend: the Lambda
router's answers (the same EventApi) behind a plain HTTP/1.1 server, and what only the server
decides (framing, oversized and malformed requests)."""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from entrypoints.api import MAX_BODY_BYTES, EventApi
from entrypoints.cli.api_server import LocalApiServer
from entrypoints.containers import provide, shutdown
from entrypoints.embedded import EmbeddedContainer
from entrypoints.settings import load_settings

URL = "ws://127.0.0.1:9/stream/feed"


@pytest.fixture(params=[True, False], ids=["allow-private", "default-ssrf-rules"])
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LocalApiServer]:
    env = {"WSFLEET_DATA_DIR": str(tmp_path)}
    if request.param:
        env["WSFLEET_ALLOW_PRIVATE_UPSTREAMS"] = "true"
    container = EmbeddedContainer(settings=load_settings(env))
    api: EventApi = await provide(container.core.api)
    local = LocalApiServer(api, "127.0.0.1", 0)
    await local.start()
    try:
        yield local
    finally:
        await local.close()
        await shutdown(container)


async def exchange(server: LocalApiServer, raw: bytes) -> tuple[int, dict[str, str], Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(raw)
    await writer.drain()
    response = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = response.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, json.loads(body)


async def call(
    server: LocalApiServer, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    raw = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n"
    return await exchange(server, raw.encode() + payload)


def start(cid: str, url: str = URL) -> dict[str, str]:
    return {"event_type": "START", "connection_id": cid, "ws_url": url}


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
async def test_commands_answer_as_the_lambda_router_does(server: LocalApiServer) -> None:
    first, headers, body = await call(server, "POST", "/events", start("feed"))
    again, _, _ = await call(server, "POST", "/events", start("feed"))
    conflict, _, _ = await call(server, "PUT", "/connections/feed", {"ws_url": URL + "x"})
    read, _, view = await call(server, "GET", "/connections/feed")
    stopped, _, _ = await call(server, "POST", "/connections/feed/stop")
    history, _, events = await call(server, "GET", "/connections/feed/history")

    assert (first, again, conflict, read, stopped, history) == (202, 200, 409, 200, 202, 200)
    assert body["result"] == "accepted"
    assert headers["Content-Type"] == "application/json"
    assert len(headers["X-Request-Id"]) == 32
    assert view["desired_state"] == "STARTED"
    assert [e["type"] for e in events["events"]] == ["ConnectionStarted", "StopRequested"]


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
async def test_refusals_carry_the_routers_codes(server: LocalApiServer) -> None:
    unknown, _, body = await call(server, "GET", "/connections/ghost")
    wrong_method, headers, _ = await call(server, "DELETE", "/connections/ghost")
    no_route, _, _ = await call(server, "GET", "/nothing/here")
    malformed, _, bad = await call(server, "POST", "/events", None)

    assert (unknown, wrong_method, no_route, malformed) == (404, 405, 404, 400)
    assert body["error"] == "not_found"
    assert headers["Allow"] == "GET, PUT"
    assert bad["error"] == "malformed_json"


@pytest.mark.parametrize("server", [False], indirect=True, ids=["default-ssrf-rules"])
async def test_internal_upstreams_are_refused_by_default(server: LocalApiServer) -> None:
    status, _, body = await call(server, "POST", "/events", start("feed"))

    assert status == 400
    assert body["error"] == "forbidden_url"


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
async def test_an_oversized_body_is_refused_413_before_it_is_read(server: LocalApiServer) -> None:
    raw = f"POST /events HTTP/1.1\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()

    status, _, body = await exchange(server, raw)  # no body sent: the answer must not wait

    assert status == 413
    assert body["error"] == "payload_too_large"


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
@pytest.mark.parametrize(
    "raw",
    [
        b"nonsense\r\n\r\n",
        b"POST /events HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /events HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
        b"GET /" + b"x" * 10_000 + b" HTTP/1.1\r\n\r\n",
    ],
    ids=["request-line", "chunked", "content-length", "too-long"],
)
async def test_malformed_requests_are_answered_400(server: LocalApiServer, raw: bytes) -> None:
    status, headers, body = await exchange(server, raw)

    assert status == 400
    assert body["error"] == "invalid_request"
    assert "X-Request-Id" in headers
