"""The worker process's parts in-process: identity, signals, health endpoint, JSON logs. The
worker is the real one, built from in-memory adapters through the same core container the
AWS deployment uses."""

import asyncio
import io
import json
import logging
import os
import re
import signal
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from adapters.memory.upstream import FakeUpstream
from adapters.system.clock import SystemClock
from application.worker.worker import Worker
from application.worker_ids import name_of
from entrypoints.containers import CoreContainer, provide
from entrypoints.logging_setup import bind, setup_logging
from entrypoints.settings import load_settings
from entrypoints.worker.health import HealthServer
from entrypoints.worker.identity import METADATA_VARIABLE, new_worker_id
from entrypoints.worker.signals import DELIBERATE_AFTER_S, WATCHDOG_EXIT_CODE, ShutdownSignals
from tests.support.logs import preserved_logging

# --- identity -------------------------------------------------------------------------------


@pytest.fixture
def metadata_endpoint() -> Iterator[str]:
    """The ECS task metadata endpoint (v4), on loopback."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(
                {"TaskARN": "arn:aws:ecs:eu-west-1:123456789012:task/fleet/0f1e2d3c4b5a"}
            ).encode()
            self.send_response(200 if self.path == "/v4/abc/task" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v4/abc"
    finally:
        server.shutdown()
        server.server_close()


async def test_worker_id_is_the_ecs_task_id_plus_a_suffix_unique_per_incarnation(
    metadata_endpoint: str,
) -> None:
    first = await new_worker_id({METADATA_VARIABLE: metadata_endpoint})
    second = await new_worker_id({METADATA_VARIABLE: metadata_endpoint})

    assert first.startswith("0f1e2d3c4b5a-")
    assert second.startswith("0f1e2d3c4b5a-")
    assert first != second


async def test_worker_id_falls_back_to_the_host_name_when_metadata_is_unreachable(
    unused_tcp_port: int,
) -> None:
    worker_id = await new_worker_id(
        {METADATA_VARIABLE: f"http://127.0.0.1:{unused_tcp_port}/v4"}, timeout_s=0.5
    )
    expected = re.sub(r"[^A-Za-z0-9._-]+", "-", socket.gethostname()).strip("-")[:64]
    assert name_of(worker_id) == expected


# --- signals --------------------------------------------------------------------------------


class Exits:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.shutdowns = 0

    def request_shutdown(self) -> None:
        self.shutdowns += 1


async def _deliver(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    for _ in range(50):  # the loop runs the handler on its next iterations
        await asyncio.sleep(0.01)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def clocked() -> AsyncIterator[tuple[Exits, Clock]]:
    exits, clock = Exits(), Clock()
    signals = ShutdownSignals(
        exits.request_shutdown, budget_s=30, exit_now=exits.codes.append, monotonic=clock
    )
    signals.install()
    try:
        yield exits, clock
    finally:
        await signals.uninstall()


async def test_a_repeated_sigterm_never_cuts_the_graceful_shutdown_short(
    clocked: tuple[Exits, Clock],
) -> None:
    exits, clock = clocked
    await _deliver(signal.SIGTERM)
    assert (exits.shutdowns, exits.codes) == (1, [])
    await _deliver(signal.SIGTERM)
    clock.now += 60
    await _deliver(signal.SIGTERM)
    assert (exits.shutdowns, exits.codes) == (1, [])


async def test_a_sigint_right_after_the_first_signal_is_taken_for_a_duplicate(
    clocked: tuple[Exits, Clock],
) -> None:
    exits, clock = clocked
    await _deliver(signal.SIGTERM)
    clock.now += DELIBERATE_AFTER_S / 2
    await _deliver(signal.SIGINT)
    assert (exits.shutdowns, exits.codes) == (1, [])


async def test_a_second_sigint_a_second_later_forces_exit(
    clocked: tuple[Exits, Clock],
) -> None:
    exits, clock = clocked
    await _deliver(signal.SIGINT)
    clock.now += DELIBERATE_AFTER_S
    await _deliver(signal.SIGINT)
    assert (exits.shutdowns, exits.codes) == (1, [128 + signal.SIGINT])


async def test_sigquit_forces_exit_at_once(clocked: tuple[Exits, Clock]) -> None:
    exits, _ = clocked
    await _deliver(signal.SIGQUIT)
    assert (exits.shutdowns, exits.codes) == (0, [128 + signal.SIGQUIT])


async def test_a_shutdown_that_overruns_its_budget_is_cut_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("entrypoints.worker.signals.WATCHDOG_GRACE_S", 0.05)
    exits = Exits()
    signals = ShutdownSignals(exits.request_shutdown, budget_s=0.05, exit_now=exits.codes.append)
    signals.install()
    try:
        await _deliver(signal.SIGTERM)
        assert exits.codes == [WATCHDOG_EXIT_CODE]
    finally:
        await signals.uninstall()


# --- health endpoint ------------------------------------------------------------------------


@pytest.fixture
async def running_worker() -> AsyncIterator[Worker]:
    settings = load_settings({"WSFLEET_POLL_WAIT_S": "0.05", "WSFLEET_CAPACITY_PAUSE_S": "0.05"})
    clock = SystemClock()
    core = CoreContainer(
        settings=settings,
        store=InMemoryConnectionStore(),
        queue=InMemoryNotificationQueue(clock),
        sink=InMemoryMessageSink(),
        metrics=InMemoryMetrics(),
        upstream=FakeUpstream(clock, 10.0),
    )
    worker: Worker = await provide(core.worker, worker_id="w-test-1")
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.request_shutdown()
        await asyncio.wait_for(task, 10)


async def _get(port: int, request: bytes) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    if not raw:
        return 0, None
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_health_endpoint_answers_healthz_and_status_then_503_once_stopped(
    running_worker: Worker,
) -> None:
    server = HealthServer(running_worker, "127.0.0.1", 0, "svc")
    await server.start()
    try:
        await asyncio.sleep(0.1)
        status, health = await _get(
            server.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        )
        assert status == 200
        assert health["healthy"] is True
        assert set(health["loops_alive"]) >= {"poll", "reconcile"}

        status, view = await _get(server.port, b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status == 200
        assert view["worker_id"] == "w-test-1"
        assert view["service"] == "svc"
        assert view["active_connections"] == 0
        assert view["connections"] == []

        assert (await _get(server.port, b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))[
            0
        ] == 405
        assert (await _get(server.port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))[
            0
        ] == 404
        assert (await _get(server.port, b"garbage\r\n\r\n"))[0] == 400  # answered, no crash

        running_worker.request_shutdown()
        await asyncio.sleep(0.2)
        status, health = await _get(
            server.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        )
        assert status == 503
        assert health["healthy"] is False
    finally:
        await server.close()


# --- logs -----------------------------------------------------------------------------------


def test_every_log_line_is_one_json_object_with_extras_and_bound_context() -> None:
    stream = io.StringIO()
    with preserved_logging():
        setup_logging("INFO", stream)
        with bind(request_id="r-1"):
            logging.getLogger("application.x").info(
                "lease acquired", extra={"connection_id": "c1", "worker_id": "w1", "token": 3}
            )
        logging.getLogger("botocore.credentials").info("not shown: libraries at WARNING")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("application.x").exception("failed")

    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "lease acquired"
    assert first["level"] == "INFO"
    assert (first["connection_id"], first["worker_id"], first["token"]) == ("c1", "w1", 3)
    assert first["request_id"] == "r-1"
    assert first["ts"].endswith("Z")
    assert "request_id" not in second  # the binding ended with its block
    assert "ValueError: boom" in second["exception"]


def test_no_character_in_a_logged_value_can_split_the_line() -> None:
    """Upstream text reaches the logs: U+2028/U+2029/U+0085 written raw would be line breaks
    to JavaScript readers and str.splitlines, so one value could forge a second record."""
    forged = 'caf\u00e9\u2028{"level": "INFO"}\u2029y\u0085z\x9b'
    stream = io.StringIO()
    with preserved_logging():
        setup_logging("INFO", stream)
        logging.getLogger("application.x").warning("got %s", forged, extra={"reason": forged})

    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert "\\u2028" in lines[0]
    assert "\\u0085" in lines[0]
    record = json.loads(lines[0])
    assert (record["message"], record["reason"]) == (f"got {forged}", forged)
    assert "café" in lines[0]  # other text stays readable


def test_gc_thresholds_are_applied_from_the_setting_and_python_keeps_cpythons() -> None:
    import gc

    from entrypoints.settings import SettingsError
    from entrypoints.worker.gc_tuning import tune_gc

    before = gc.get_threshold()
    try:
        tune_gc(load_settings({}).gc_thresholds)
        assert gc.get_threshold() == (50_000, 20, 100)
        gc.set_threshold(*before)
        tune_gc(load_settings({"WSFLEET_GC_THRESHOLDS": "python"}).gc_thresholds)
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
    for bad in ("0,10,10", "700,10", "lots", "-1,10,10"):
        with pytest.raises(SettingsError, match="WSFLEET_GC_THRESHOLDS"):
            load_settings({"WSFLEET_GC_THRESHOLDS": bad})
