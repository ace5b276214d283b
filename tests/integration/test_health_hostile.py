"""The worker's health port against hostile clients, over raw sockets on 127.0.0.1: a page
reaching it through DNS rebinding, and more sockets than it serves."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from adapters.memory.upstream import FakeUpstream
from adapters.system.clock import SystemClock
from application.worker.worker import Worker
from entrypoints.containers import CoreContainer, provide
from entrypoints.settings import load_settings
from entrypoints.worker.health import MAX_CONNECTIONS, HealthServer


@pytest.fixture
async def health() -> AsyncIterator[HealthServer]:
    clock = SystemClock()
    core = CoreContainer(
        settings=load_settings({}),
        store=InMemoryConnectionStore(),
        queue=InMemoryNotificationQueue(clock),
        sink=InMemoryMessageSink(),
        metrics=InMemoryMetrics(),
        upstream=FakeUpstream(clock, 10.0),
    )
    worker: Worker = await provide(core.worker, worker_id="w-health-1")
    server = HealthServer(worker, "127.0.0.1", 0, "svc")
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def get(port: int, path: str, host: str) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    async with asyncio.timeout(10):
        raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize("path", ["/status", "/healthz"])
async def test_a_foreign_host_name_is_refused(health: HealthServer, path: str) -> None:
    """DNS rebinding: evil.example now resolves to 127.0.0.1, the browser still names it."""
    status, body = await get(health.port, path, "evil.example")

    assert (status, body) == (421, {"error": "misdirected_request"})


@pytest.mark.parametrize("host", ["127.0.0.1:8080", "localhost", "[::1]:8080", "10.0.3.7:8080"])
async def test_addresses_and_localhost_are_answered(health: HealthServer, host: str) -> None:
    """Probes and Prometheus name the address they were given."""
    status, body = await get(health.port, "/status", host)

    assert status == 503  # answered; the worker is not running, so not healthy
    assert body["worker_id"] == "w-health-1"


async def test_open_sockets_are_capped_and_a_probe_is_still_answered(
    health: HealthServer,
) -> None:
    """GIVEN 1,500 connect attempts that never send a request, THEN the port holds at most
    its cap of sockets (the oldest idle ones are closed) and a probe is answered."""
    sockets = []
    for _ in range(15):
        sockets += await asyncio.gather(
            *(asyncio.open_connection("127.0.0.1", health.port) for _ in range(100))
        )
    await asyncio.sleep(0.3)

    status, _ = await get(health.port, "/healthz", "127.0.0.1")
    closed = sum(reader.at_eof() for reader, _ in sockets)

    for _, writer in sockets:
        writer.close()
    assert closed >= len(sockets) - MAX_CONNECTIONS
    assert status == 503
