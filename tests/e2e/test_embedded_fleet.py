"""Several `wsfleet worker` processes on one SQLite data directory, through a crash (SIGKILL)
and a graceful handoff (SIGTERM). The upstream simulator is the judge: it says who was
subscribed when and what was emitted; the sink says what was stored."""

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from adapters.sqlite.message_sink import SqliteMessageSink
from application.ports import ConnectionStore
from application.router import EventRouter
from application.worker.session_keeper import worker_of
from application.worker_ids import name_of
from domain import NO_OWNER, DesiredState, LeaseStatus
from entrypoints.cli.tables import utc
from entrypoints.containers import provide, shutdown
from entrypoints.devstack.process import Process
from entrypoints.embedded import EmbeddedContainer
from entrypoints.read_side.embedded import messages_path
from entrypoints.settings import load_settings
from entrypoints.simulator import UpstreamSimulator
from tests.e2e.cli_process import cli_process, run_cli

T = TypeVar("T")
CONNECTIONS = [f"feed-{i}" for i in range(1, 7)]
TIMEOUT_S = 20.0
FAST = {
    "WSFLEET_LEASE_MS": "2000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "0.5",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "600",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    "WSFLEET_RECONCILE_INTERVAL_S": "5",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_CAPACITY_PAUSE_S": "0.5",
    "WSFLEET_SHUTDOWN_BUDGET_S": "3",
    "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": "2",
    "WSFLEET_HEALTH_PORT": "0",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
}


class Fleet:
    def __init__(self, tmp_path: Path, store: ConnectionStore, sim: UpstreamSimulator) -> None:
        self.tmp_path = tmp_path
        self.store = store
        self.sim = sim
        self.env = {**FAST, "WSFLEET_DATA_DIR": str(tmp_path / "data")}
        self.workers: dict[str, Process] = {}

    async def start_worker(self, name: str) -> Process:
        process = cli_process(name, ["worker", "--name", name], self.tmp_path, self.env)
        self.workers[name] = await process.start()
        return process

    def live(self) -> set[str]:
        return {name for name, p in self.workers.items() if p.running}

    async def owners(self) -> dict[str, str]:
        """connection -> name of the worker holding a live lease ("" if none)."""
        now = time.time_ns() // 1_000_000
        held = {}
        sessions = {s.session_id: s for s in await self.store.list_sessions()}
        for conn in await self.store.list_connections():
            live = conn.lease_status(now, sessions) is LeaseStatus.HELD
            held[conn.connection_id] = name_of(worker_of(conn.owner)) if live else ""
        return held

    async def until_each_has_one_live_owner_and_one_subscriber(self) -> dict[str, str]:
        async def settled() -> dict[str, str] | None:  # None: not yet
            owners = await self.owners()
            ok = all(
                owners.get(cid) in self.live() and self.sim.subscribers(cid) == 1
                for cid in CONNECTIONS
            )
            return owners if ok else None

        return await until(settled, "each connection has one live owner and one subscriber")


async def until(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """The first truthy answer of `probe`, polled every 0.1 s."""
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                found = await probe()
                if found:
                    return found
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[tuple[Fleet, EventRouter, SqliteMessageSink]]:
    (tmp_path / "data").mkdir()
    settings = load_settings({**FAST, "WSFLEET_DATA_DIR": str(tmp_path / "data")})
    container = EmbeddedContainer(settings=settings)
    async with (
        UpstreamSimulator(rate=20.0) as sim,
        SqliteMessageSink.open(messages_path(settings)) as sink,
    ):
        store = await provide(container.store)
        router: EventRouter = await provide(container.core.router)
        the_fleet = Fleet(tmp_path, store, sim)
        try:
            yield the_fleet, router, sink
        finally:
            for process in the_fleet.workers.values():
                await process.kill()
            await shutdown(container)


async def test_a_crash_and_a_handoff_leave_one_subscriber_each_and_every_seq_stored_once(
    fleet: tuple[Fleet, EventRouter, SqliteMessageSink],
) -> None:
    """GIVEN three worker processes on one SQLite file streaming six connections
    WHEN the busiest is SIGKILLed, then the next busiest SIGTERMed (no replacement)
    THEN the last worker holds all six, each stream has had at most one subscriber at any
    time, and once the streams end the sink holds every emitted seq exactly once, with the
    final checkpoint equal to the last seq."""
    the_fleet, router, sink = fleet
    for name in ("w1", "w2", "w3"):
        await the_fleet.start_worker(name)
    for process in the_fleet.workers.values():
        await process.wait_for_line(r"worker starting")
    for cid in CONNECTIONS:
        await router.start(cid, the_fleet.sim.url(cid))
    owners = await the_fleet.until_each_has_one_live_owner_and_one_subscriber()

    crashed = busiest(owners)
    moved = [cid for cid, name in owners.items() if name == crashed]
    the_fleet.workers[crashed].signal(signal.SIGKILL)
    assert await the_fleet.workers[crashed].wait(5) == -signal.SIGKILL
    owners = await the_fleet.until_each_has_one_live_owner_and_one_subscriber()
    assert crashed not in owners.values()

    stopped = busiest(owners)
    moved += [cid for cid, name in owners.items() if name == stopped]
    the_fleet.workers[stopped].signal(signal.SIGTERM)
    assert await the_fleet.workers[stopped].wait(15) == 0
    owners = await the_fleet.until_each_has_one_live_owner_and_one_subscriber()
    (last,) = the_fleet.live()
    assert set(owners.values()) == {last}

    for cid in CONNECTIONS:
        the_fleet.sim.end_stream(cid)

    async def all_ended() -> bool:
        conns = await the_fleet.store.list_connections()
        return all(c.desired_state is DesiredState.STOPPED and c.owner == NO_OWNER for c in conns)

    await until(all_ended, "every stream ended and was released")
    final = {c.connection_id: c for c in await the_fleet.store.list_connections()}
    for cid in CONNECTIONS:
        record = the_fleet.sim.record(cid)
        stored = await sink.seqs(cid)
        assert record["peak_subscribers"] == 1, record["connections"]
        assert stored == list(range(1, record["emitted"] + 1)), cid
        assert final[cid].checkpoint_seq == record["emitted"]
    for cid in moved:
        assert the_fleet.sim.record(cid)["connects"] >= 2  # it really moved


def busiest(owners: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for name in owners.values():
        counts[name] = counts.get(name, 0) + 1
    return max(counts, key=lambda name: counts[name])


async def test_a_second_worker_under_a_live_worker_id_is_refused_at_start(
    fleet: tuple[Fleet, EventRouter, SqliteMessageSink],
) -> None:
    """GIVEN `WSFLEET_WORKER_ID=fixed-1 wsfleet worker` running, WHEN a second one starts on
    the same data directory under the same id, THEN it exits 2 naming the id and the live
    session, and the first keeps its session."""
    the_fleet, _, _ = fleet
    env = {**the_fleet.env, "WSFLEET_WORKER_ID": "fixed-1"}
    first = await cli_process("first", ["worker"], the_fleet.tmp_path, env).start()
    the_fleet.workers["first"] = first
    await first.wait_for_line(r"worker session fixed-1#1 opened")

    second = await cli_process("second", ["worker"], the_fleet.tmp_path, env).start()
    the_fleet.workers["second"] = second

    assert await second.exit_code(20) == 2, second.output()
    assert "wsfleet worker: worker id 'fixed-1' is in use: its session 'fixed-1#1' is live" in (
        second.output()
    )
    assert "Traceback" not in second.output()
    assert first.running
    (session,) = await the_fleet.store.list_sessions()
    assert session.session_id == "fixed-1#1"
    assert session.is_live(time.time_ns() // 1_000_000)


async def test_a_crashed_workers_session_history_says_it_expired_and_who_found_it(
    fleet: tuple[Fleet, EventRouter, SqliteMessageSink],
) -> None:
    """GIVEN a worker holding a connection, and a second worker WHEN the first is SIGKILLed
    THEN the second takes the connection over and `wsfleet history <dead session>` shows,
    after its SessionOpened, a SessionExpired: when its last renew ran out, found by the
    second worker's session."""
    the_fleet, router, _ = fleet
    crashed = await cli_process(
        "crashed", ["worker"], the_fleet.tmp_path, {**the_fleet.env, "WSFLEET_WORKER_ID": "crash-1"}
    ).start()
    the_fleet.workers["crashed"] = crashed
    await crashed.wait_for_line(r"worker session crash-1#1 opened")
    await router.start("feed-1", the_fleet.sim.url("feed-1"))

    async def owner() -> str:
        conn = await the_fleet.store.get("feed-1")
        return "" if conn is None else conn.owner

    assert await until(owner, "the first worker holds feed-1") == "crash-1#1"
    finder = await cli_process(
        "finder", ["worker"], the_fleet.tmp_path, {**the_fleet.env, "WSFLEET_WORKER_ID": "find-2"}
    ).start()
    the_fleet.workers["finder"] = finder
    await finder.wait_for_line(r"worker session find-2#1 opened")
    crashed.signal(signal.SIGKILL)
    assert await crashed.wait(5) == -signal.SIGKILL

    async def taken() -> bool:
        return await owner() == "find-2#1"

    await until(taken, "the second worker takes feed-1 over")
    dead = await the_fleet.store.get_session("crash-1#1")
    assert dead is not None

    async def noted() -> bool:
        return len(await the_fleet.store.session_history("crash-1#1")) == 2

    await until(noted, "the expiry is in the dead session's history")
    text = run_cli(["history", "crash-1#1"], the_fleet.tmp_path, the_fleet.env)
    document = run_cli(["history", "crash-1#1", "--json"], the_fleet.tmp_path, the_fleet.env)

    assert text.returncode == 0, text.stderr
    rows = [line for line in text.stdout.splitlines() if "Session" in line]
    assert [row.split("│")[2].strip() for row in rows] == ["SessionOpened", "SessionExpired"]
    assert f"expired_at={utc(dead.expires_at_ms)}, found_by=find-2#1" in rows[1], text.stdout
    opened, expired = json.loads(document.stdout)["events"]
    assert (opened["type"], expired["type"]) == ("SessionOpened", "SessionExpired")
    assert (expired["expired_at_ms"], expired["found_by"]) == (dead.expires_at_ms, "find-2#1")
    assert expired["at_ms"] > dead.expires_at_ms
    history = run_cli(["history", "feed-1", "--json"], the_fleet.tmp_path, the_fleet.env)
    takeover = json.loads(history.stdout)["events"][-1]
    assert (takeover["type"], takeover["previous_owner"]) == ("LeaseTakenOver", "crash-1#1")
