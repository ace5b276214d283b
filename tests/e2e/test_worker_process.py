"""The worker process end to end: `python -m entrypoints.worker` as real subprocesses against
the moto server (DynamoDB, SQS, CloudWatch) and the upstream simulator (the judge of who was
subscribed when, and of what was sent)."""

import asyncio
import json
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.dynamodb.message_reader import DynamoDbMessageReader
from adapters.dynamodb.schema import DEFAULT_MESSAGES_TABLE
from application.router import EventRouter
from application.worker.session_keeper import worker_of
from domain import NO_OWNER
from entrypoints.api import EventApi, HttpRequest
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.devstack.aws import LocalAws
from entrypoints.settings import load_settings
from entrypoints.simulator import UpstreamSimulator
from examples.file_sink import FileSink
from tests.e2e.worker_process import FAST, ROOT, WorkerProcess, base_env, worker_process
from tests.support.deployment import create_deployment

BUDGET_S = float(FAST["WSFLEET_SHUTDOWN_BUDGET_S"])


class Deployment:
    def __init__(self, env: dict[str, str], container: AwsContainer, log_dir: Path) -> None:
        self.env = env
        self.container = container
        self.log_dir = log_dir
        self.workers: list[WorkerProcess] = []

    async def api(self) -> EventApi:
        api: EventApi = await provide(self.container.core.api)
        return api

    async def router(self) -> EventRouter:
        router: EventRouter = await provide(self.container.core.router)
        return router

    def worker(self, name: str, **extra: str) -> WorkerProcess:
        process = worker_process(name, {**self.env, **extra}, self.log_dir)
        self.workers.append(process)
        return process

    async def stored_seqs(self, connection_id: str) -> list[int]:
        client = await provide(self.container.dynamodb)
        return await DynamoDbMessageReader(client, DEFAULT_MESSAGES_TABLE).seqs(connection_id)


@pytest.fixture
async def deployment(aws: LocalAws, tmp_path: Path) -> AsyncIterator[Deployment]:
    env = {**await create_deployment(aws), **FAST}
    container = AwsContainer(settings=load_settings(env))
    deployment = Deployment(env, container, tmp_path)
    try:
        yield deployment
    finally:
        for worker in deployment.workers:
            await worker.kill()
        await shutdown(container)


@pytest.fixture
async def simulator() -> AsyncIterator[UpstreamSimulator]:
    async with UpstreamSimulator(rate=20.0) as sim:
        yield sim


async def until(predicate: Callable[[], Any], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


async def start(api: EventApi, connection_id: str, ws_url: str) -> int:
    body = json.dumps({"event_type": "START", "connection_id": connection_id, "ws_url": ws_url})
    response = await api.handle(HttpRequest("POST", "/events", body.encode(), "e2e"))
    return response.status


async def test_worker_streams_then_hands_over_on_sigterm_to_another_worker(
    deployment: Deployment, simulator: UpstreamSimulator
) -> None:
    """GIVEN worker A streaming connection m1 and an idle worker B, WHEN A gets SIGTERM, THEN
    A releases and exits 0 within its budget, B subscribes about a second later (the lease is
    10 s, so only the handoff explains it), never two subscribers at once, and the messages
    table holds every seq exactly once, without a gap."""
    a = deployment.worker("a")
    await a.start()
    await a.wait_healthy()
    api, router = await deployment.api(), await deployment.router()

    simulator.create_stream("m1")
    assert await start(api, "m1", simulator.url("m1")) == 202

    await until(lambda: simulator.record("m1")["subscribers"] == 1, 15, "A to subscribe")
    await until(lambda: _at_least(deployment.stored_seqs("m1"), 10), 15, "messages stored")
    _, status_a = await a.get("/status")
    assert status_a["active_connections"] == 1
    assert status_a["connections"][0]["connection_id"] == "m1"
    b = deployment.worker("b")
    await b.start()
    await b.wait_healthy()
    _, status_b = await b.get("/status")
    conn = await router.get("m1")
    assert conn is not None
    assert worker_of(conn.owner) == status_a["worker_id"]

    began = time.monotonic()
    a.signal(signal.SIGTERM)
    assert await a.wait(BUDGET_S + 5) == 0, a.output()
    assert time.monotonic() - began < BUDGET_S

    await until(lambda: simulator.record("m1")["connects"] == 2, 10, "B to subscribe")
    record = simulator.record("m1")
    first, second = record["connections"]
    handoff_ms = second["connected_at_ms"] - first["disconnected_at_ms"]
    assert 0 <= handoff_ms < 3_000, handoff_ms
    assert record["peak_subscribers"] == 1
    assert second["from_seq"] <= first["last_seq"] + 1  # resumed without a gap
    conn = await router.get("m1")
    assert conn is not None
    assert worker_of(conn.owner) == status_b["worker_id"]
    assert conn.token == 2
    history = [type(e).__name__ for e in await router.history("m1")]
    assert history[-2:] == ["LeaseReleased", "LeaseAcquired"]  # a handoff, not a takeover

    await asyncio.sleep(0.5)  # B streams for a while, then hands back too
    b.signal(signal.SIGTERM)
    assert await b.wait(BUDGET_S + 5) == 0, b.output()
    seqs = await deployment.stored_seqs("m1")
    assert seqs == list(range(1, max(seqs) + 1))
    assert max(seqs) >= second["from_seq"]

    lines = await a.log_lines()
    assert all(line.get("worker_id") == status_a["worker_id"] for line in lines), lines[:3]
    leases = [line for line in lines if line.get("token") and line.get("connection_id") == "m1"]
    assert leases, "lease transitions are logged with the connection id and token"


async def test_a_sigterm_delivered_twice_within_a_millisecond_still_hands_every_connection_over(
    deployment: Deployment, simulator: UpstreamSimulator
) -> None:
    """GIVEN a worker streaming three connections, WHEN it gets SIGTERM twice 1 ms apart (as
    `timeout` or a supervisor signalling the process and its group delivers it), THEN it still
    shuts down gracefully: exit 0, every connection released, none left owned by its session."""
    worker = deployment.worker("twice")
    await worker.start()
    await worker.wait_healthy()
    api, router = await deployment.api(), await deployment.router()
    ids = ["t1", "t2", "t3"]
    for cid in ids:
        simulator.create_stream(cid)
        assert await start(api, cid, simulator.url(cid)) == 202
    await until(lambda: all(simulator.subscribers(c) == 1 for c in ids), 15, "all subscribed")
    await until(lambda: _owned(router, ids), 15, "every connection owned")

    worker.signal(signal.SIGTERM)
    await asyncio.sleep(0.001)
    worker.signal(signal.SIGTERM)

    assert await worker.wait(BUDGET_S + 5) == 0, worker.output()
    for cid in ids:
        conn = await router.get(cid)
        assert conn is not None
        assert conn.owner == NO_OWNER, (cid, conn.owner)
        assert simulator.subscribers(cid) == 0
    # The kernel merges a second SIGTERM still pending when the first is handled: then only
    # one arrives, and "SIGTERM ignored" is not logged. What must never appear either way is
    # the forced exit a repeated SIGTERM once caused.
    assert "exiting without finishing the shutdown" not in worker.output()


async def _owned(router: EventRouter, ids: list[str]) -> bool:
    conns = [await router.get(cid) for cid in ids]
    return all(c is not None and c.owner != NO_OWNER for c in conns)


async def _at_least(seqs: Any, n: int) -> bool:
    return len(await seqs) >= n


async def test_a_second_worker_under_a_live_worker_id_is_refused_at_start(
    deployment: Deployment,
) -> None:
    """The same as on the embedded backend (tests/e2e/test_embedded_fleet.py), on DynamoDB:
    the second worker under WSFLEET_WORKER_ID=fixed-1 exits 2, the first keeps streaming."""
    first = deployment.worker("first", WSFLEET_WORKER_ID="fixed-1")
    await first.start()
    await first.wait_healthy()
    second = deployment.worker("second", WSFLEET_WORKER_ID="fixed-1")
    await second.start()

    assert await second.wait(20) == 2, second.output()
    assert "wsfleet worker: worker id 'fixed-1' is in use: its session 'fixed-1#1' is live" in (
        second.output()
    )
    assert "Traceback" not in second.output()
    _, status = await first.get("/status")
    assert status["worker_id"] == "fixed-1"
    assert (await first.get("/healthz"))[0] == 200


async def test_worker_process_stores_messages_through_the_example_sink(
    deployment: Deployment, simulator: UpstreamSimulator, tmp_path: Path
) -> None:
    """WSFLEET_MESSAGE_SINK replaces the messages table with examples/file_sink.py."""
    out = FileSink(tmp_path / "sink" / "wsfleet")
    worker = deployment.worker(
        "sinky",
        WSFLEET_MESSAGE_SINK="examples.file_sink:create",
        FILE_SINK_DIR=str(tmp_path / "sink"),
    )
    await worker.start()
    await worker.wait_healthy()
    simulator.create_stream("m9")

    assert await start(await deployment.api(), "m9", simulator.url("m9")) == 202
    await until(lambda: len(out.seqs("m9")) >= 5, 15, "messages in the example sink")
    worker.signal(signal.SIGTERM)

    assert await worker.wait(BUDGET_S + 5) == 0, worker.output()
    seqs = out.seqs("m9")
    assert seqs == list(range(1, max(seqs) + 1))
    assert await deployment.stored_seqs("m9") == []  # the default table was not used


async def test_health_endpoint_reports_healthy_and_status(
    deployment: Deployment,
) -> None:
    worker = deployment.worker("solo")
    await worker.start()
    health = await worker.wait_healthy()

    assert health["healthy"] is True
    assert all(health["loops_alive"].values())
    status, body = await worker.get("/status")
    assert status == 200
    assert re.fullmatch(r"[A-Za-z0-9._-]+-[0-9a-f]{8}", body["worker_id"]), body["worker_id"]
    assert body["active_connections"] == 0
    assert (await worker.get("/nope"))[0] == 404

    probe = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "entrypoints.worker.healthcheck", env=worker.env, cwd=ROOT
    )
    assert await probe.wait() == 0
    worker.signal(signal.SIGINT)
    assert await worker.wait(BUDGET_S + 5) == 0


_AWS = {
    "WSFLEET_BACKEND": "aws",
    "WSFLEET_QUEUE_URL": "http://127.0.0.1:9/q",
    "WSFLEET_REGION": "eu-west-1",
}
CONFIG_ERRORS = [
    ({**_AWS, "WSFLEET_LEASE_MS": "abc"}, "WSFLEET_LEASE_MS='abc': expected integer >= 1000"),
    ({"WSFLEET_BACKEND": "aws"}, "WSFLEET_QUEUE_URL: required when the backend is aws"),
    ({**_AWS, "WSFLEET_LEASE_MSS": "5"}, "unknown variable; did you mean WSFLEET_LEASE_MS?"),
    (
        {**_AWS, "WSFLEET_HEARTBEAT_INTERVAL_S": "30"},
        "WSFLEET_HEARTBEAT_INTERVAL_S must be shorter than the lease",
    ),
    ({"WSFLEET_BACKEND": "embedded"}, "run the embedded backend with `wsfleet worker`"),
]


@pytest.mark.parametrize(("env", "message"), CONFIG_ERRORS)
async def test_configuration_errors_exit_2_with_the_documented_message(
    env: dict[str, str], message: str
) -> None:
    code, stderr = await _run_worker(env)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr


async def test_a_message_sink_that_cannot_be_loaded_exits_2(deployment: Deployment) -> None:
    code, stderr = await _run_worker(
        {
            **deployment.env,
            "WSFLEET_MESSAGE_SINK": "no_such_module:Sink",
            "WSFLEET_HEALTH_PORT": "0",
        }
    )
    assert code == 2
    assert "WSFLEET_MESSAGE_SINK='no_such_module:Sink': cannot import 'no_such_module'" in stderr
    assert "Traceback" not in stderr


async def test_a_health_port_in_use_exits_2_naming_the_variable() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = await _run_worker({**_AWS, "WSFLEET_HEALTH_PORT": str(port)})
    assert code == 2
    assert f"WSFLEET_HEALTH_PORT={port}: cannot listen on 127.0.0.1:{port}" in stderr
    assert "Traceback" not in stderr


async def _run_worker(env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "entrypoints.worker",
        env=base_env(env),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, stderr.decode()
