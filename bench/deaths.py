"""Known deaths: `wsfleet fleet --workers N` as a real process
tree, the simulator in a process of its own as the judge, at a long lease (30 s by default) so
that nothing here can heal by expiry.

(b) SIGKILL of a supervised worker, `kills` times (the busiest child each time): per connection
it held, the time from the exit being observed (the supervisor's log line, when it reaped the
child) to the new owner's subscribe (the simulator's timestamp), and from the SIGKILL itself.
Target: p99 <= 1 s after the exit is observed, at any lease length.

(c) a false death report for a live worker, `false_reports` times: its sessions ended under it
(application/deaths.py, as `wsfleet end-session` does). Its connections are taken by others at
once; it fences on its next renew. Reported: the most subscribers any stream had at once, time
with two, the time until every stream has one subscriber again, lost and duplicated (the
run's final judgement, bench/fleet_scenario.py's).
"""

import asyncio
import logging
import os
import signal
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from application.deaths import WorkerDeaths
from application.worker.session_keeper import worker_of
from bench.backends import Backend
from bench.fleet_scenario import judge
from bench.stats import summary
from bench.timings import BENCH_CONFIG, worker_env
from entrypoints.devstack import records
from entrypoints.devstack.process import Process, alive
from entrypoints.devstack.records import wall_ms
from entrypoints.devstack.service import child_env
from entrypoints.devstack.simulator import SimulatorProcess

log = logging.getLogger("bench.deaths")
WAIT_S = 20.0  # below the lease: a heal slower than this is a timeout, not waited for
EXITED = "fleet worker exited"
STARTED = "fleet worker started"
READY = "running (lease"  # a worker's log line once it streams


class DeathsRun:
    def __init__(
        self, backend: Backend, sim: SimulatorProcess, log_dir: Path, supervisor: Process
    ) -> None:
        self.backend = backend
        self.sim = sim
        self.log_dir = log_dir
        self.supervisor = supervisor
        self.streams: dict[str, Any] = {}
        self.ids: list[str] = []

    async def children(self) -> dict[str, int]:
        """Worker id -> pid of every child started so far."""
        return {
            line["child_worker_id"]: int(line["pid"])
            for line in await self.supervisor.log_lines()
            if line.get("message") == STARTED
        }

    async def exited_at(self, worker_id: str) -> int | None:
        for line in await self.supervisor.log_lines():
            if str(line.get("message", "")).startswith(EXITED) and (
                line.get("child_worker_id") == worker_id
            ):
                return _epoch_ms(str(line["ts"]))
        return None

    async def owners(self) -> dict[str, list[str]]:
        """Worker id -> the connections its live session holds (the store's view)."""
        held: dict[str, list[str]] = {}
        for conn in await self.backend.store.list_connections():
            if conn.owner:
                held.setdefault(worker_of(conn.owner), []).append(conn.connection_id)
        return held

    async def refresh(self) -> dict[str, Any]:
        self.streams = await self.sim.records()
        return self.streams

    async def settled(self, workers: int) -> None:
        """Every connection has one subscriber, and `workers` children run."""
        deadline = asyncio.get_running_loop().time() + 3 * WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            await self.refresh()
            running = sum(1 for pid in (await self.children()).values() if alive(pid))
            # Every child ever started has finished starting (its start-up costs a second of
            # CPU that a takeover measured meanwhile would share).
            started = len(await self.children())
            ready = self.supervisor.output().count(READY) >= started
            if (
                running == workers
                and ready
                and all(records.live_count(self.streams.get(c)) == 1 for c in self.ids)
            ):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError("the supervised fleet did not settle")

    def connected_since(self, at: int) -> Callable[[str], int | None]:
        """When a subscriber first connected at or after `at`."""
        return lambda cid: records.first_connect_since(self.streams.get(cid), at)

    def healed_since(self, at: int) -> Callable[[str], int | None]:
        """When a stream live at `at` had one subscriber again, a new one: the later of the new
        subscriber's connect and the old one's disconnect (its fence)."""

        def when(cid: str) -> int | None:
            record = self.streams.get(cid)
            connected = records.first_connect_since(record, at)
            gone = records.disconnect_of_live_at(record, at)
            if connected is None or gone is None or records.live_count(record) != 1:
                return None
            return max(connected, gone)

        return when

    async def wait_each(
        self, ids: list[str], when: Callable[[str], int | None]
    ) -> tuple[dict[str, int], int]:
        """The time `when` gives for each id (polled); and how many never came."""
        return await records.poll_each(self.refresh, ids, when, WAIT_S)


async def run_deaths(
    backend: Backend,
    sim: SimulatorProcess,
    log_dir: Path,
    *,
    workers: int = 3,
    connections: int = 30,
    kills: int = 5,
    false_reports: int = 3,
    lease_ms: int = 30_000,
) -> dict[str, Any]:
    config = attrs.evolve(BENCH_CONFIG, lease_ms=lease_ms)
    env = {
        **worker_env(config),
        **backend.env,
        "WSFLEET_MAX_CONNECTIONS": "100",
        "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
        "WSFLEET_LOG_LEVEL": "INFO",
    }
    argv = ["fleet", "--workers", str(workers), "--name", "bench", "--restart-delay", "0.5"]
    supervisor = Process.python(
        f"{backend.name}-deaths-fleet",
        "entrypoints.cli",
        argv,
        log_dir,
        child_env(env),
        merged=True,
        own_session=True,
    )
    await supervisor.start()
    run = DeathsRun(backend, sim, log_dir, supervisor)
    deaths = WorkerDeaths(backend.store, backend.queue, backend.container.core.clock())
    observed: list[float] = []
    from_kill: list[float] = []
    timeouts = {"kill": 0, "false_report": 0}
    reports: list[dict[str, Any]] = []
    per_kill: list[dict[str, Any]] = []
    began = wall_ms()
    try:
        run.ids = [f"{backend.name}-d{i:03d}" for i in range(connections)]
        ids, run.ids = run.ids, []
        await run.settled(workers)  # the children run (no connection yet)
        run.ids = ids
        for cid in run.ids:
            await backend.router.start(cid, sim.url(cid))
            await asyncio.sleep(0.02)
        await run.settled(workers)
        for number in range(1, kills + 1):
            log.info("%s deaths: kill %d/%d", backend.name, number, kills)
            await asyncio.sleep(1.0)
            held = await run.owners()
            children = await run.children()
            living = {w: pid for w, pid in children.items() if alive(pid)}
            victim = max(living, key=lambda w: len(held.get(w, [])))
            moved = held.get(victim, [])
            at = wall_ms()
            os.kill(living[victim], signal.SIGKILL)
            found, missing = await run.wait_each(moved, run.connected_since(at))
            timeouts["kill"] += missing
            seen = await run.exited_at(victim)
            mine = [(t - seen) / 1000 for t in found.values()] if seen is not None else []
            observed.extend(mine)
            from_kill.extend((t - at) / 1000 for t in found.values())
            per_kill.append(
                {
                    "connections": len(moved),
                    "reaped_after_s": None if seen is None else (seen - at) / 1000,
                    "observed_to_subscribe_s": summary(mine),
                }
            )
            await run.settled(workers)
        for number in range(1, false_reports + 1):
            log.info("%s deaths: false report %d/%d", backend.name, number, false_reports)
            await asyncio.sleep(2.0)
            held = await run.owners()
            victim = max(held, key=lambda w: len(held[w]))
            moved = held[victim]
            at = wall_ms()
            await deaths.worker_died(victim, "bench: a false death report")
            # Healed: every moved stream has one subscriber again, connected since the report.
            found, missing = await run.wait_each(moved, run.healed_since(at))
            timeouts["false_report"] += missing
            await run.settled(workers)
            reports.append(
                {
                    "worker": victim,
                    "connections": len(moved),
                    "healed_s": summary([(t - at) / 1000 for t in found.values()]),
                }
            )
        await asyncio.sleep(1.0)
    finally:
        supervisor.signal(signal.SIGTERM)  # every child hands its connections back
        code = await supervisor.exit_code(60)
        if code is None:
            await supervisor.kill()
    ended = wall_ms()
    streams = await run.refresh()
    verdict = await judge(backend, run.ids, streams, ended)
    peak = max((int(streams[c]["peak_subscribers"]) for c in run.ids if c in streams), default=0)
    overlaps = [records.overlap_ms(streams[c], ended) for c in run.ids if c in streams]
    return {
        "backend": backend.name,
        "engine": backend.engine,
        "workers": workers,
        "connections": connections,
        "lease_ms": lease_ms,
        "kills": kills,
        "latency_s": {
            "observed_to_subscribe": summary(observed),
            "kill_to_subscribe": summary(from_kill),
        },
        "per_kill": per_kill,
        "false_reports": reports,
        "most_subscribers": peak,
        "overlap_ms_max": max(overlaps, default=0),
        "timeouts": timeouts,
        "supervisor_exit": code,
        "verdict": verdict,
        "began_ms": began,
        "ended_ms": ended,
    }


def _epoch_ms(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
