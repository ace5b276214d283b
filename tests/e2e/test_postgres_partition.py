"""Two worker hosts and a PostgreSQL host on one machine (network namespaces, entrypoints/
devstack/netns.py), the upstream simulator on a host of its own reached over a LAN that does
not touch the database's. One worker host is cut off from the database only: its upstream
connections stay up, so only its own self-fence can stop them. Then the database restarts
under both. The simulator (who was subscribed when, from which address) and the stored rows
are the judges, never what the workers say."""

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TypeVar

import attrs
import pytest

from application.config import WorkerConfig
from application.errors import SinkRefused
from application.ports.sink import StoredMessage
from application.worker.session_keeper import incarnation_of, worker_of
from application.worker_ids import worker_id_for
from domain import NO_OWNER, DesiredState, WorkerSession
from entrypoints.containers import provide
from entrypoints.devstack import netns, records
from entrypoints.devstack.backends import LocalDeployment, open_postgres
from entrypoints.devstack.judge import judge_stream
from entrypoints.devstack.netns import HERE, Network
from entrypoints.devstack.postgres import LocalPostgres, locate, open_local_postgres
from entrypoints.devstack.simulator import SimulatorProcess
from entrypoints.devstack.workers import WorkerProcess, worker_timings
from tests.support import postgres as postgres_support
from tests.support.netns import require_namespaces

pytestmark = pytest.mark.serial

T = TypeVar("T")
LAYOUT = {"db": ("w1", "w2", HERE), "up": ("w1", "w2", HERE)}
WORKERS = ("w1", "w2")
CONNECTIONS = [f"feed-{i}" for i in range(1, 9)]
RATE = 20.0  # messages per second per stream
# The chaos suite's scale: lease 2 s, heartbeat 0.5 s, self-fence margin 0.5 s, STOP check 1 s.
CONFIG = WorkerConfig().scaled(0.5)
SETTINGS = {
    **worker_timings(CONFIG),
    "WSFLEET_INGEST_FLUSH_INTERVAL_S": "0.25",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",  # the simulator is on 10.231.x.1
}
WAIT_S = 30.0


@attrs.define
class Stack:
    net: Network
    postgres: LocalPostgres
    sim: SimulatorProcess
    deployment: LocalDeployment
    workers: dict[str, WorkerProcess]
    worker_ids: dict[str, str]  # name -> worker id

    def host_of(self, remote: str) -> str:
        """The worker host a subscriber's address ("10.231.7.11:40312") belongs to."""
        address = remote.rsplit(":", 1)[0]
        found = [w for w in WORKERS if self.net.address(w, "up") == address]
        return found[0] if found else remote

    async def subscribers(self) -> dict[str, list[str]]:
        """Per connection, the hosts of its live subscribers."""
        streams = await self.sim.records()
        return {
            cid: [
                self.host_of(c["remote"])
                for c in streams.get(cid, {}).get("connections", [])
                if c["disconnected_at_ms"] is None
            ]
            for cid in CONNECTIONS
        }


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    require_namespaces()
    if isinstance(found := locate(), str):
        postgres_support.missing_server(found)
    async with AsyncExitStack() as exits:
        net = await exits.enter_async_context(netns.open_network(LAYOUT))
        db, up = net.address("db", "db"), net.address("up", "up")
        server = await exits.enter_async_context(
            open_local_postgres(tmp_path, host=db, launcher=net.launcher("db"))
        )
        sim = SimulatorProcess(tmp_path, rate=RATE, host=up, launcher=net.launcher("up"))
        exits.push_async_callback(sim.child.kill)
        await sim.start()
        deployment = await exits.enter_async_context(open_postgres(server, settings=SETTINGS))
        workers: dict[str, WorkerProcess] = {}
        for name in WORKERS:
            workers[name] = WorkerProcess(
                name,
                tmp_path,
                {
                    **deployment.env,
                    **SETTINGS,
                    "WSFLEET_WORKER_ID": worker_id_for(name),
                },
                deployment.worker_argv(name),
                health_host=net.address(name, "up"),
                launcher=net.launcher(name),
            )
            exits.push_async_callback(workers[name].kill)
        await asyncio.gather(*(w.start() for w in workers.values()))
        statuses = await asyncio.gather(
            *(w.wait_healthy(WAIT_S, path="/status") for w in workers.values())
        )
        ids = {name: status["worker_id"] for name, status in zip(WORKERS, statuses, strict=True)}
        yield Stack(net, server, sim, deployment, workers, ids)


async def test_a_worker_cut_off_from_the_database_fences_itself_and_nothing_is_lost(
    stack: Stack,
) -> None:
    """GIVEN two worker hosts streaming eight connections between them
    WHEN one host's database link is cut while its upstream link stays up
    THEN the simulator sees each of its subscribers gone before its session could expire,
    and the other host subscribed to them all; once the link returns, no row of the cut-off
    session lies where the other host's subscription began (a write in flight across the
    cut landed refused, or was rewritten), and the sink refuses its token; it streams again,
    and a database restart under both loses nothing. In the end every emitted seq is stored
    once, each checkpoint is the last seq, and no stream ever had two subscribers."""
    for cid in CONNECTIONS:
        await stack.deployment.router.start(cid, stack.sim.url(cid))
    await until(lambda: both_hosts_streaming(stack), "one subscriber each, on both hosts")
    await until(lambda: stored_past(stack, {}), "a second of every stream stored")
    before = await stack.subscribers()
    cut_off = [cid for cid, hosts in before.items() if hosts == ["w1"]]

    cut_ms = records.wall_ms()
    await asyncio.to_thread(stack.net.cut, "w1", "db")
    await until(lambda: all_on(stack, "w2"), "the other host holds every stream")
    status, _ = await stack.workers["w1"].get("/status")
    assert status != 0  # its upstream LAN still answers: only the database link is cut
    session = await session_of(stack, "w1")  # as it stood when the link went: not renewed since
    streams = await stack.sim.records()
    for cid in cut_off:
        gone_ms = records.disconnect_of_live_at(streams[cid], cut_ms)
        assert gone_ms is not None, streams[cid]
        assert gone_ms < session.expires_at_ms, (streams[cid], session)
    during_cut = await emitted(stack)
    await until(lambda: stored_past(stack, during_cut), "a second more stored by the other host")

    await asyncio.to_thread(stack.net.restore, "w1", "db")
    await until(lambda: reopened(stack, "w1", session.session_id), "w1 opens a new session")
    await until(lambda: both_hosts_streaming(stack), "w1 streams again, one subscriber each")

    at_restart = await emitted(stack)
    await asyncio.to_thread(stack.postgres.restart)
    await until(lambda: stored_past(stack, at_restart), "every stream stores past the restart")
    await until(lambda: each_has_one_subscriber(stack), "one subscriber each after the restart")

    for cid in CONNECTIONS:
        await stack.sim.end(cid)
    await until(lambda: all_released(stack), "every stream ended and was released")
    streams = await stack.sim.records()
    final = {c.connection_id: c for c in await stack.deployment.store.list_connections()}
    for cid in CONNECTIONS:
        seqs = await stack.deployment.seqs(cid)
        facts = judge_stream(cid, streams[cid], final[cid].checkpoint_seq, seqs)
        assert (facts.lost, facts.duplicated, facts.beyond_emitted) == (0, 0, 0), facts
        assert facts.peak_subscribers == 1, facts
        assert facts.checkpoint == facts.emitted, facts
    for cid in cut_off:
        rows = await stack.deployment.messages(cid)
        old = [m for m in rows if m.worker_id == session.session_id]
        assert old, cid  # it stored some before the cut
        # Where the other host's subscription began (the simulator's record) the cut-off
        # worker's rows must end: a write of its still in flight, landing once the link
        # returned, is refused (stale) or rewritten by the newer token.
        resumed = taken_over_at(stack, streams[cid], cut_ms)
        assert not [m.seq for m in old if m.seq >= resumed], (cid, resumed)
        assert_tokens_never_go_back(rows)
        await assert_fence_refuses(stack, attrs.evolve(rows[-1], token=old[-1].token))


def taken_over_at(stack: Stack, record: records.Record, cut_ms: int) -> int:
    """The first seq the other host was sent after the cut."""
    return min(
        int(c["first_seq"])
        for c in record["connections"]
        if c["connected_at_ms"] >= cut_ms and stack.host_of(c["remote"]) == "w2" and c["first_seq"]
    )


def assert_tokens_never_go_back(rows: list[StoredMessage]) -> None:
    """In seq order a row under an older token never follows one under a newer."""
    for before, after in itertools.pairwise(rows):
        assert before.token <= after.token, (before, after)


async def assert_fence_refuses(stack: Stack, message: StoredMessage) -> None:
    """The cut-off worker's write, as it would land after the link returned: refused."""
    sink = await provide(stack.deployment.container.postgres_messages)
    with pytest.raises(SinkRefused) as refused:
        await sink.write([message])
    assert (message.connection_id, message.seq) in refused.value.stale


async def both_hosts_streaming(stack: Stack) -> bool:
    subs = await stack.subscribers()
    hosts = [h for cid in CONNECTIONS for h in subs[cid]]
    return all(len(subs[cid]) == 1 for cid in CONNECTIONS) and set(hosts) == set(WORKERS)


async def all_on(stack: Stack, host: str) -> bool:
    subs = await stack.subscribers()
    return all(subs[cid] == [host] for cid in CONNECTIONS)


async def each_has_one_subscriber(stack: Stack) -> bool:
    subs = await stack.subscribers()
    return all(len(subs[cid]) == 1 for cid in CONNECTIONS)


async def session_of(stack: Stack, name: str) -> WorkerSession:
    """The worker's latest session."""
    sessions = await stack.deployment.store.list_sessions()
    mine = [s for s in sessions if worker_of(s.session_id) == stack.worker_ids[name]]
    return max(mine, key=lambda s: incarnation_of(s.session_id))


async def reopened(stack: Stack, name: str, old_session_id: str) -> bool:
    now = records.wall_ms()
    return any(
        worker_of(s.session_id) == stack.worker_ids[name]
        and s.session_id != old_session_id
        and s.is_live(now)
        for s in await stack.deployment.store.list_sessions()
    )


async def emitted(stack: Stack) -> dict[str, int]:
    return {cid: int(r["emitted"]) for cid, r in (await stack.sim.records()).items()}


async def stored_past(stack: Stack, emitted: dict[str, int]) -> bool:
    """Every stream has stored a second's messages past `emitted` (its seq then)."""
    for cid in CONNECTIONS:
        seqs = await stack.deployment.seqs(cid)
        if not seqs or seqs[-1] <= emitted.get(cid, 0) + int(RATE):
            return False
    return True


async def all_released(stack: Stack) -> bool:
    conns = await stack.deployment.store.list_connections()
    return len(conns) == len(CONNECTIONS) and all(
        c.desired_state is DesiredState.STOPPED and c.owner == NO_OWNER for c in conns
    )


async def until(probe: Callable[[], Awaitable[T]], what: str, wait_s: float = WAIT_S) -> T:
    """The first truthy answer of `probe`, polled every 0.1 s (a deadline, not a bound)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if found := await probe():
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {wait_s:.0f} s: {what}")
