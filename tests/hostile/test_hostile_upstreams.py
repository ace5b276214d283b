"""The hostile-upstream tier (issue 13): every kind of hostile upstream (entrypoints/simulator/
hostile.py) served next to good streams to real worker processes, on every backend, through a
rolling SIGTERM. The judges:

- every good stream, and every tolerated misbehaviour, is stored with no gap and its own
  data, and was handed over at each SIGTERM: its history has no expiry takeover, and no
  stall as long as a lease;
- every stream that breaks the contract ends in the persisted back-off, with nothing stored
  past its last good message, and was connected at most a few times in all;
- every worker exits 0 on SIGTERM (none died of a neighbour's message).
"""

import asyncio
import itertools
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Protocol

import attrs
import pytest

from adapters.dynamodb.schema import TableNames
from adapters.sqlite.message_sink import SqliteMessageSink
from application.ports import ConnectionStore, StoredMessage
from application.router import EventRouter
from domain.events import LeaseTakenOver, UpstreamFailed
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.backends import open_postgres
from entrypoints.embedded import EmbeddedContainer
from entrypoints.read_side.embedded import messages_path
from entrypoints.settings import load_settings
from entrypoints.simulator import UpstreamSimulator, is_message
from entrypoints.simulator.hostile import FAULTS, GOOD_FIRST, TOLERATED
from tests.e2e.cli_process import cli_process
from tests.e2e.worker_process import worker_process
from tests.support.deployment import create_deployment
from tests.support.dynamodb import read_messages

# Stall bounds on the good streams: no other test beside it (Makefile, `test`).
pytestmark = pytest.mark.serial

GOOD = [f"good-{i}" for i in range(1, 4)]
SETTINGS = {
    "WSFLEET_LEASE_MS": "4000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "0.5",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "1200",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    "WSFLEET_RECONCILE_INTERVAL_S": "5",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_CAPACITY_PAUSE_S": "0.5",
    "WSFLEET_SHUTDOWN_BUDGET_S": "3",
    "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": "2",
    "WSFLEET_INGEST_FLUSH_INTERVAL_S": "0.05",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
    "WSFLEET_UPSTREAM_OPEN_TIMEOUT_S": "1",
    "WSFLEET_RECONNECT_ATTEMPTS": "2",
    "WSFLEET_RECONNECT_BASE_S": "0.2",
    "WSFLEET_POISON_BACKOFF_BASE_S": "60",
}
# Every renewal and every (conditional, per message) sink write is an HTTP call to a JVM that
# shares the machine's two cores with the workers: the AWS backend renews less often.
AWS_PACE = {
    "WSFLEET_LEASE_MS": "10000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "2",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "3000",
    "WSFLEET_SHUTDOWN_BUDGET_S": "6",
}
PHASE_S = 3.0  # between the steps of the rolling restart
MOST_CONNECTS = 3  # "a few": a fault, and at most a retry or two around a handoff


class Worker(Protocol):
    def signal(self, sig: signal.Signals) -> None: ...

    async def wait(self, timeout_s: float) -> int: ...

    async def kill(self) -> None: ...


@attrs.define
class Backend:
    lease_ms: int  # what a stream that waited for its lease to expire would have stalled
    router: EventRouter
    store: ConnectionStore
    read: Callable[[str], Awaitable[list[StoredMessage]]]
    start_worker: Callable[[str], Awaitable[Worker]]
    workers: list[Worker] = attrs.Factory(list)


async def embedded(
    stack: AsyncExitStack, request: pytest.FixtureRequest, extra: Mapping[str, str]
) -> Backend:
    tmp: Path = request.getfixturevalue("tmp_path")
    (tmp / "data").mkdir()
    env = {**SETTINGS, **extra, "WSFLEET_DATA_DIR": str(tmp / "data"), "WSFLEET_HEALTH_PORT": "0"}
    container = EmbeddedContainer(settings=load_settings(env))
    stack.push_async_callback(shutdown, container)
    sink = await stack.enter_async_context(
        SqliteMessageSink.open(messages_path(container.settings()))
    )

    async def start_worker(name: str) -> Worker:
        process = await cli_process(name, ["worker", "--name", name], tmp, env).start()
        await process.wait_for_line(r"worker starting")
        return process

    return Backend(
        int(SETTINGS["WSFLEET_LEASE_MS"]),
        await provide(container.core.router),
        await provide(container.store),
        sink.read,
        start_worker,
    )


async def aws(
    stack: AsyncExitStack, request: pytest.FixtureRequest, extra: Mapping[str, str]
) -> Backend:
    tmp: Path = request.getfixturevalue("tmp_path")
    local: LocalAws = request.getfixturevalue("aws")
    env = {**await create_deployment(local), **SETTINGS, **AWS_PACE, **extra}
    container = AwsContainer(settings=load_settings(env))
    stack.push_async_callback(shutdown, container)
    client = await provide(container.dynamodb)

    async def read(cid: str) -> list[StoredMessage]:
        return await read_messages(client, TableNames().messages, cid)

    async def start_worker(name: str) -> Worker:
        process = worker_process(name, env, tmp)
        await process.start()
        await process.wait_healthy(60)  # a loaded 2-core machine starts boto slowly
        return process

    return Backend(
        int(AWS_PACE["WSFLEET_LEASE_MS"]),
        await provide(container.core.router),
        await provide(container.store),
        read,
        start_worker,
    )


async def postgres(
    stack: AsyncExitStack, request: pytest.FixtureRequest, extra: Mapping[str, str]
) -> Backend:
    """The dev stack's deployment on the session's PostgreSQL, image workers on it."""
    tmp: Path = request.getfixturevalue("tmp_path")
    server = request.getfixturevalue("postgres_server")
    deployment = await stack.enter_async_context(open_postgres(server, {**SETTINGS, **extra}))
    env = {**SETTINGS, **extra, **deployment.env}

    async def start_worker(name: str) -> Worker:
        process = worker_process(name, env, tmp)
        await process.start()
        await process.wait_healthy(60)
        return process

    return Backend(
        int(SETTINGS["WSFLEET_LEASE_MS"]),
        deployment.router,
        deployment.store,
        deployment.messages,
        start_worker,
    )


# Every AWS request is an HTTP call to a JVM on the same two cores: the AWS streams are slower.
BACKENDS = {"embedded": (embedded, 10.0), "aws": (aws, 3.0), "postgres": (postgres, 10.0)}


async def _served(
    request: pytest.FixtureRequest, extra: Mapping[str, str]
) -> AsyncIterator[tuple[Backend, UpstreamSimulator, float]]:
    make, rate = BACKENDS[request.param]
    async with AsyncExitStack() as stack:
        sim = await stack.enter_async_context(UpstreamSimulator(rate=rate))
        backend = await make(stack, request, extra)
        try:
            yield backend, sim, rate
        finally:
            for worker in backend.workers:
                await worker.kill()


@pytest.fixture(params=list(BACKENDS))
async def setup(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[Backend, UpstreamSimulator, float]]:
    async for served in _served(request, {}):
        yield served


# A back-off short enough to see several connects of one poison within a test.
FAST_BACKOFF = {"WSFLEET_POISON_BACKOFF_BASE_S": "0.5"}


@pytest.fixture(params=list(BACKENDS))
async def fast_backoff(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[Backend, UpstreamSimulator, float]]:
    async for served in _served(request, FAST_BACKOFF):
        yield served


async def test_hostile_upstreams_cost_only_their_own_connections(
    setup: tuple[Backend, UpstreamSimulator, float],
) -> None:
    backend, sim, rate = setup
    urls = {cid: sim.url(cid) for cid in GOOD}
    urls |= {f"h-{kind}": f"{sim.base_url}/hostile/{kind}/h-{kind}" for kind in FAULTS + TOLERATED}
    for name in ("w1", "w2"):
        backend.workers.append(await backend.start_worker(name))
    for cid, url in urls.items():
        await backend.router.start(cid, url)

    # The rolling restart: w1 leaves, w3 joins, w2 leaves.
    await asyncio.sleep(PHASE_S)
    w1, w2 = backend.workers
    w1.signal(signal.SIGTERM)
    assert await w1.wait(10) == 0
    backend.workers.append(await backend.start_worker("w3"))
    await asyncio.sleep(PHASE_S)
    w2.signal(signal.SIGTERM)
    assert await w2.wait(10) == 0
    await asyncio.sleep(PHASE_S)

    tolerated = GOOD + [f"h-{kind}" for kind in TOLERATED]
    stalls: dict[str, int] = {}
    for cid in tolerated:
        stored = await backend.read(cid)
        seqs = [m.seq for m in stored]
        gaps = [b.received_at_ms - a.received_at_ms for a, b in itertools.pairwise(stored)]
        assert len(seqs) > GOOD_FIRST + rate * PHASE_S, f"{cid} stored too little: {seqs} {gaps}"
        assert seqs == list(range(1, len(seqs) + 1)), f"{cid}: gap or duplicate"
        assert all(is_message(m.data, cid, m.seq) for m in stored), f"{cid}: not its own data"
        stalls[cid] = max(gaps)
        # Handed over, not waited out: an ownership change by expiry is a LeaseTakenOver.
        history = await backend.router.history(cid)
        assert not [e for e in history if isinstance(e, LeaseTakenOver)], (cid, history)
    now_ms = time.time_ns() // 1_000_000
    for kind in FAULTS:
        cid = f"h-{kind}"
        state = await backend.store.get(cid)
        assert state is not None
        assert state.not_before_ms > now_ms, f"{cid} is not backing off: {state}"
        connects = sim.hostile_connects.get(cid, 0)
        last_good = 0 if kind == "slow-handshake" else GOOD_FIRST
        kept = [m.seq for m in await backend.read(cid)]
        if kind == "replay-different" and len(kept) > last_good:
            # Moved between seq 5 and seq 6: the next connection sends seq 6 before its replay
            # (hostile.py _misbehaves_at), one good message more per such connect.
            last_good = min(len(kept), GOOD_FIRST + connects - 1)
        assert kept == list(range(1, last_good + 1)), (cid, kept, connects)
        # Never past what the upstream may still send: the next owner asks for it again.
        assert state.checkpoint_seq <= last_good, (cid, state)
        assert 1 <= connects <= MOST_CONNECTS, (cid, sim.hostile_connects)
    # How long a handoff takes (target: a second) is a latency, measured by `make bench`, not
    # here: beside the chaos suite on a 2-core machine one took 2.5 s. A stall as long as a
    # lease is no latency but a stream left unowned until a scan found it.
    assert max(stalls.values()) < backend.lease_ms, stalls
    w3 = backend.workers[2]
    w3.signal(signal.SIGTERM)
    assert await w3.wait(10) == 0


async def test_a_poison_that_sends_a_good_message_on_every_connect_backs_off_longer_each_time(
    fast_backoff: tuple[Backend, UpstreamSimulator, float],
) -> None:
    """One good message (stored: progress) then a jump, on every connect: progress made in
    less than WSFLEET_UPSTREAM_HEALTHY_S does not restart the failure count, so the back-off
    grows (it stayed at its first step, failures 1, connect after connect)."""
    backend, sim, _ = fast_backoff
    backend.workers.append(await backend.start_worker("w1"))
    cid = "h-jump-per-connect"
    await backend.router.start(cid, f"{sim.base_url}/hostile/jump-per-connect/{cid}")

    failed: list[UpstreamFailed] = []
    deadline = time.monotonic() + 40
    while len(failed) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        failed = [e for e in await backend.router.history(cid) if isinstance(e, UpstreamFailed)]

    assert [e.failures for e in failed[:3]] == [1, 2, 3], failed
    rests = [e.not_before_ms - e.at_ms for e in failed[:3]]
    assert rests[2] > rests[0], rests  # base 0.5 s: [0.25, 0.5] s, then [1, 2] s
    assert [m.seq for m in await backend.read(cid)][:3] == [1, 2, 3], "each connect stored one"
    w1 = backend.workers[0]
    w1.signal(signal.SIGTERM)
    assert await w1.wait(10) == 0
