"""`wsfleet fleet --workers 2` as a real process tree, on one SQLite data directory and on one
PostgreSQL database, with a 30 s lease: a SIGKILLed child's connections are taken over by its
sibling once the supervisor has reaped it (its session ended, its connections hinted), not when
the lease runs out; the child is restarted under a new worker id; SIGTERM stops the tree
cleanly. The upstream simulator and the sink are the judges."""

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from application.ports import ConnectionStore
from application.worker.session_keeper import worker_of
from domain import NO_OWNER, DesiredState, LeaseStatus
from entrypoints.devstack.backends import LocalDeployment, open_embedded, open_postgres
from entrypoints.devstack.process import Process, alive
from entrypoints.simulator import UpstreamSimulator
from tests.e2e.cli_process import cli_process

T = TypeVar("T")
CONNECTIONS = [f"feed-{i}" for i in range(1, 7)]
LEASE_S = 30
# Well inside the lease: what happens by then cannot be an expiry.
TIMEOUT_S = 20.0
ENV = {
    "WSFLEET_LEASE_MS": str(LEASE_S * 1000),
    "WSFLEET_HEARTBEAT_INTERVAL_S": "1",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "1000",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    "WSFLEET_RECONCILE_INTERVAL_S": "120",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_SHUTDOWN_BUDGET_S": "3",
    "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": "2",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
}


async def until(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                found = await probe()
                if found:
                    return found
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


async def children(supervisor: Process) -> dict[str, int]:
    """worker id -> pid of every child the supervisor started, from its log."""
    return {
        line["child_worker_id"]: int(line["pid"])
        for line in await supervisor.log_lines()
        if line.get("message") == "fleet worker started"
    }


async def owners(store: ConnectionStore) -> dict[str, str]:
    """connection -> worker id holding a live lease ("" if none)."""
    now = time.time_ns() // 1_000_000
    sessions = {s.session_id: s for s in await store.list_sessions()}
    return {
        c.connection_id: worker_of(c.owner)
        if c.lease_status(now, sessions) is LeaseStatus.HELD
        else ""
        for c in await store.list_connections()
    }


@pytest.fixture(params=["embedded", "postgres"])
async def stack(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[LocalDeployment, UpstreamSimulator]]:
    """The dev stack's deployment (the caller's view of the fleet's state) and the simulator."""
    if request.param == "postgres":
        opening = open_postgres(request.getfixturevalue("postgres_server"), ENV)
    else:
        opening = open_embedded(tmp_path / "data", ENV)
    async with UpstreamSimulator(rate=20.0) as sim, opening as deployment:
        yield deployment, sim


async def test_a_killed_child_is_reaped_its_connections_move_at_once_and_it_restarts(
    tmp_path: Path, stack: tuple[LocalDeployment, UpstreamSimulator]
) -> None:
    deployment, sim = stack
    router, store = deployment.router, deployment.store
    env: dict[str, Any] = {**ENV, **deployment.env}
    args = ["fleet", "--workers", "2", "--name", "box", "--restart-delay", "0.5"]
    supervisor = await cli_process("fleet", args, tmp_path, env).start()
    try:

        async def both_run() -> bool:
            return supervisor.output().count("running (lease") == 2

        await until(both_run, "both workers run")
        for cid in CONNECTIONS:
            await router.start(cid, sim.url(cid))
        first = await children(supervisor)
        assert len(first) == 2

        async def settled() -> dict[str, str] | None:
            held = await owners(store)
            living = {w for w, pid in (await children(supervisor)).items() if alive(pid)}
            ok = all(held.get(c) in living and sim.subscribers(c) == 1 for c in CONNECTIONS)
            return held if ok else None

        held = await until(settled, "each connection has one live owner and one subscriber")
        victim = max(first, key=lambda w: sum(1 for o in held.values() if o == w))
        moved = [c for c, o in held.items() if o == victim]
        os.kill(first[victim], signal.SIGKILL)

        async def moved_on() -> dict[str, str] | None:
            found = await settled()
            return found if found and all(found[c] != victim for c in moved) else None

        # Not by expiry (the lease is 30 s, this waits at most 20): the victim's session was
        # ended by the supervisor that reaped it.
        await until(moved_on, "the victim's connections have a new owner")
        (session,) = [s for s in await store.list_sessions() if worker_of(s.session_id) == victim]
        assert session.ended_reason is not None
        assert "reaped by wsfleet fleet" in session.ended_reason
        assert "SIGKILL" in session.ended_reason
        # Restarted under a new worker id.
        restarted = await until(
            lambda: _new_child(supervisor, first), "the killed child is restarted"
        )
        assert restarted not in first

        for cid in CONNECTIONS:
            sim.end_stream(cid)

        async def all_ended() -> bool:
            conns = await store.list_connections()
            return all(
                c.desired_state is DesiredState.STOPPED and c.owner == NO_OWNER for c in conns
            )

        await until(all_ended, "every stream ended and was released")
        for cid in CONNECTIONS:
            record = sim.record(cid)
            assert record["peak_subscribers"] == 1, record["connections"]
            assert await deployment.seqs(cid) == list(range(1, record["emitted"] + 1)), cid
        for cid in moved:
            assert sim.record(cid)["connects"] >= 2  # it really moved

        pids = list((await children(supervisor)).values())
        supervisor.signal(signal.SIGTERM)
        assert await supervisor.wait(20) == 0
        assert not [pid for pid in pids if alive(pid)]  # no orphan left behind
    finally:
        await supervisor.kill()


async def _new_child(supervisor: Process, before: dict[str, int]) -> str | None:
    new = [w for w in await children(supervisor) if w not in before]
    return new[0] if new else None
