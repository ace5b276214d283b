"""The local event API (`wsfleet api`) over real sockets, on the embedded backend: the Lambda
router's answers (the same EventApi) behind a plain HTTP/1.1 server, and what only the server
decides (framing, oversized and malformed requests, Host, token, Content-Type, open sockets)."""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from entrypoints.api import MAX_BODY_BYTES, EventApi
from entrypoints.cli.api_perimeter import ApiPerimeter
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
    server: LocalApiServer,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str | None] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """A request as a well-behaved client sends it; `headers` adds to or replaces (None
    value: removes) the defaults."""
    payload = b"" if body is None else json.dumps(body).encode()
    sent: dict[str, str | None] = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Type": "application/json",
    }
    sent.update(headers or {})
    head = "".join(f"{name}: {value}\r\n" for name, value in sent.items() if value is not None)
    raw = f"{method} {path} HTTP/1.1\r\n{head}Content-Length: {len(payload)}\r\n\r\n"
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
    # A decoded newline still reaches the API's routes (the id is refused), not aiohttp's 404.
    newline, _, odd = await call(server, "GET", "/connections/a%0Ab/history")
    wrong_method, headers, _ = await call(server, "DELETE", "/connections/ghost")
    no_route, _, _ = await call(server, "GET", "/nothing/here")
    malformed, _, bad = await call(server, "POST", "/events", None)

    assert (unknown, newline, wrong_method, no_route, malformed) == (404, 400, 405, 404, 400)
    assert odd["error"] == "invalid_request"
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
    head = f"POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Length: {MAX_BODY_BYTES + 1}"
    raw = f"{head}\r\n\r\n".encode()

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


# --- the local perimeter: what API Gateway's IAM auth does for the Lambda router -------------


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[LocalApiServer]:
    """An API with a token, an extra allowed name and room for 3 connections."""
    container = EmbeddedContainer(
        settings=load_settings(
            {"WSFLEET_DATA_DIR": str(tmp_path), "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}
        )
    )
    api: EventApi = await provide(container.core.api)
    perimeter = ApiPerimeter.of("127.0.0.1", ["api.internal.example"], TOKEN)
    local = LocalApiServer(api, "127.0.0.1", 0, perimeter, max_connections=3)
    await local.start()
    try:
        yield local
    finally:
        await local.close()
        await shutdown(container)


TOKEN = "t0ken-of-sixteen-chars"
AUTH: dict[str, str | None] = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
async def test_a_command_that_is_not_declared_json_is_refused_415_and_changes_nothing(
    server: LocalApiServer, content_type: str | None
) -> None:
    """A web page can POST these across sites without a preflight; never JSON."""
    start_status, _, body = await call(
        server, "POST", "/events", start("feed"), {"Content-Type": content_type}
    )
    stop_status, _, _ = await call(
        server, "POST", "/connections/feed/stop", None, {"Content-Type": content_type}
    )
    read, _, _ = await call(server, "GET", "/connections/feed", None, {"Content-Type": None})

    assert (start_status, stop_status, body["error"]) == (415, 415, "unsupported_media_type")
    assert read == 404  # nothing was started; a GET needs no Content-Type


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
async def test_json_with_a_charset_is_json(server: LocalApiServer) -> None:
    status, _, _ = await call(
        server,
        "POST",
        "/events",
        start("feed"),
        {"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert status == 202


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST."])
async def test_the_bound_and_loopback_names_are_answered(server: LocalApiServer, host: str) -> None:
    assert (await call(server, "GET", "/connections/x", None, {"Host": host}))[0] == 404


@pytest.mark.parametrize("server", [True], indirect=True, ids=["allow-private"])
@pytest.mark.parametrize(
    ("host", "status"), [("attacker.example:8000", 421), ("127.0.0.1.nip.io", 421), (None, 400)]
)
async def test_a_foreign_or_missing_host_is_refused_before_anything_is_done(
    server: LocalApiServer, host: str | None, status: int
) -> None:
    """DNS rebinding: the attacker's name now points at 127.0.0.1, but the browser still
    sends it in Host."""
    refused, _, body = await call(server, "POST", "/events", start("feed"), {"Host": host})
    read, _, _ = await call(server, "GET", "/connections/feed")

    assert refused == status
    assert body["error"] in ("misdirected_request", "invalid_request")
    assert read == 404


async def test_a_configured_name_is_answered(guarded: LocalApiServer) -> None:
    headers = {"Host": "API.internal.example:443", **AUTH}
    assert (await call(guarded, "GET", "/connections/x", None, headers))[0] == 404


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-of-sixteen", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"],
)
async def test_with_a_token_every_request_needs_it(
    guarded: LocalApiServer, authorization: str | None
) -> None:
    status, headers, body = await call(
        guarded, "POST", "/events", start("feed"), {"Authorization": authorization}
    )
    read, _, _ = await call(guarded, "GET", "/connections/feed", None, {"Authorization": None})
    allowed, _, _ = await call(guarded, "GET", "/connections/feed", None, AUTH)

    assert (status, body["error"]) == (401, "unauthorized")
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN not in json.dumps(body)
    assert (read, allowed) == (401, 404)  # nothing was started


async def test_the_right_token_is_accepted(guarded: LocalApiServer) -> None:
    status, _, _ = await call(guarded, "POST", "/events", start("feed"), AUTH)
    assert status == 202


async def test_open_connections_are_capped_and_an_idle_one_gives_way_to_a_request(
    guarded: LocalApiServer,
) -> None:
    """Three silent sockets fill the API (room for 3); a real request is still served, and
    the oldest silent socket is the one closed to make room."""
    idle = [await asyncio.open_connection("127.0.0.1", guarded.port) for _ in range(3)]
    await asyncio.sleep(0.2)  # let the server accept them

    served = (await call(guarded, "GET", "/connections/x", None, AUTH))[0]

    oldest_reader = idle[0][0]
    async with asyncio.timeout(2):
        assert await oldest_reader.read() == b""
    assert served == 404
    for _, writer in idle:
        writer.close()


async def test_with_every_socket_inside_a_request_a_new_one_is_closed_at_once(
    guarded: LocalApiServer,
) -> None:
    """Three requests whose bodies are still arriving fill the API: a fourth socket is
    closed without an answer, and served again once they are gone."""
    head = "POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    slow = f"{head}Authorization: Bearer {TOKEN}\r\nContent-Length: 10\r\n\r\n{{".encode()
    busy = [await asyncio.open_connection("127.0.0.1", guarded.port) for _ in range(3)]
    for _, writer in busy:
        writer.write(slow)
    await asyncio.sleep(0.2)

    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.port)
    async with asyncio.timeout(2):
        refused = await reader.read()
    writer.close()
    for _, slow_writer in busy:
        slow_writer.close()
    await asyncio.sleep(0.2)

    assert refused == b""
    assert (await call(guarded, "GET", "/connections/x", None, AUTH))[0] == 404


async def test_an_idle_socket_is_closed_once_its_request_is_overdue(tmp_path: Path) -> None:
    """The request must arrive within the read deadline (5 s by default; 0.2 s here), well
    before the 10 s the whole exchange may take: an idle socket does not keep its slot."""
    container = EmbeddedContainer(settings=load_settings({"WSFLEET_DATA_DIR": str(tmp_path)}))
    api: EventApi = await provide(container.core.api)
    local = LocalApiServer(api, "127.0.0.1", 0, read_timeout_s=0.2)
    await local.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", local.port)
        writer.write(b"GET /connections/x HTTP/1.1\r\n")  # ...and nothing more
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed without an answer
        writer.close()
    finally:
        await local.close()
        await shutdown(container)
