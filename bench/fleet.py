"""Fleet latencies around faults: 3 real worker processes, 30+ connections, the simulator in a
process of its own as the judge, at the default timings (lease 4 s, heartbeat 1 s).

Per round: a crash (SIGKILL of the busiest worker of a balanced fleet, past the last round's
newcomers' join grace; the replacement starts after the failover is measured, so its start-up
does not compete for the CPU), a graceful handoff (a rolling deploy: the new worker first,
then SIGTERM to an old one) and STOPs (then STARTs again, which resume from the checkpoint).
Each latency is the simulator's timestamp minus the runner's timestamp of the fault, per
connection. Afterwards every worker is stopped gracefully and the sink is judged against the
checkpoints."""

import asyncio
import logging
import random
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from application.config import WorkerConfig
from bench.backends import Backend
from bench.timings import BENCH_CONFIG
from bench.workers import bench_worker
from entrypoints.devstack import records
from entrypoints.devstack.records import wall_ms
from entrypoints.devstack.simulator import SimulatorProcess
from entrypoints.devstack.workers import WorkerProcess

log = logging.getLogger("bench.fleet")
WAIT_S = 30.0  # a fault not healed in this long is reported as a timeout, not waited for
SETTLE_S = 5.0  # after a crash's takeover, before its replacement starts


def within_band(held: list[int], total: int) -> bool:
    """Every worker within 10 % (or one connection) of the mean, and `total` held in all."""
    mean = total / len(held)
    return sum(held) == total and all(abs(h - mean) <= max(1.0, 0.1 * mean) for h in held)


class FleetRun:
    def __init__(
        self,
        backend: Backend,
        sim: SimulatorProcess,
        log_dir: Path,
        rng: random.Random,
        config: WorkerConfig = BENCH_CONFIG,
    ) -> None:
        self.backend = backend
        self.config = config
        self.sim = sim
        self.log_dir = log_dir
        self.rng = rng
        self.workers: list[WorkerProcess] = []
        self.retired: list[WorkerProcess] = []
        self.ids: list[str] = []
        self.samples: dict[str, list[float]] = {
            "pickup": [],
            "crash": [],
            "handoff": [],
            "stop": [],
        }
        self.timeouts: dict[str, int] = dict.fromkeys(self.samples, 0)
        self.faults: list[dict[str, Any]] = []
        self._seq = 0
        self.streams: dict[str, Any] = {}

    async def add_worker(self) -> WorkerProcess:
        self._seq += 1
        name = f"{self.backend.name}-w{self._seq}"
        worker = bench_worker(name, self.backend, self.log_dir, 100, self.config)
        await worker.start()
        await worker.wait_healthy()
        self.workers.append(worker)
        return worker

    async def refresh(self) -> dict[str, Any]:
        self.streams = await self.sim.records()
        return self.streams

    async def wait_each(
        self, ids: list[str], when: Callable[[str], int | None], kind: str, since_ms: dict[str, int]
    ) -> None:
        """Poll the records until `when(cid)` gives a time for every id; record the latencies."""
        found, missing = await records.poll_each(self.refresh, ids, when, WAIT_S, 0.1)
        self.samples[kind] += [(at - since_ms[cid]) / 1000 for cid, at in found.items()]
        self.timeouts[kind] += missing
        if missing:
            log.warning("%s: %d connections not healed in %ss", kind, missing, WAIT_S)

    def _connected_since(self, since: dict[str, int]) -> Callable[[str], int | None]:
        return lambda cid: records.first_connect_since(self.streams.get(cid), since[cid])

    async def start_connections(self, ids: list[str], spacing_s: float = 0.1) -> None:
        since: dict[str, int] = {}
        for cid in ids:
            since[cid] = wall_ms()
            await self.backend.router.start(cid, self.sim.url(cid))
            await asyncio.sleep(spacing_s)
        await self.wait_each(ids, self._connected_since(since), "pickup", since)

    async def busiest(
        self, exclude: WorkerProcess | None = None
    ) -> tuple[WorkerProcess, list[str]]:
        held = {w.name: await w.held() for w in self.workers if w is not exclude}
        name = max(held, key=lambda n: len(held[n]))
        return next(w for w in self.workers if w.name == name), held[name]

    async def crash(self) -> None:
        victim, held = await self.busiest()
        at = wall_ms()
        victim.signal(signal.SIGKILL)
        await victim.exit_code(10)
        self.workers.remove(victim)
        self.retired.append(victim)
        since = dict.fromkeys(held, at)
        await self.wait_each(held, self._connected_since(since), "crash", since)
        # Long enough for balancing among the survivors to move what placement left uneven
        # (it waits a view reported after the last take): the moves are counted until the
        # replacement joins, whose own share is a join's move, not the crash's.
        await asyncio.sleep(SETTLE_S)
        self._fault("crash", victim, at, held, moves_until_ms=wall_ms())
        await self.add_worker()  # the orchestrator's replacement, after the measurement

    async def handoff(self) -> None:
        newcomer = await self.add_worker()
        leaving, held = await self.busiest(exclude=newcomer)
        at = wall_ms()
        leaving.signal(signal.SIGTERM)
        since = dict.fromkeys(held, at)
        await self.wait_each(held, self._connected_since(since), "handoff", since)
        code = await leaving.exit_code(15)
        self.workers.remove(leaving)
        self.retired.append(leaving)
        self._fault("handoff", leaving, at, held, exit_code=code)

    async def stop_and_restart(self, count: int) -> None:
        chosen = self.rng.sample(self.ids, count)
        since: dict[str, int] = {}
        for cid in chosen:
            since[cid] = wall_ms()
            await self.backend.router.stop(cid)
        await self.wait_each(
            chosen,
            lambda cid: records.disconnect_of_live_at(self.streams.get(cid), since[cid]),
            "stop",
            since,
        )
        self.faults.append({"kind": "stop", "at_ms": min(since.values()), "connections": chosen})
        await asyncio.sleep(0.5)
        await self.start_connections(chosen, spacing_s=0.05)

    def _fault(
        self, kind: str, worker: WorkerProcess, at: int, held: list[str], **extra: Any
    ) -> None:
        self.faults.append(
            {"kind": kind, "worker": worker.name, "at_ms": at, "connections": held, **extra}
        )

    async def balanced(self) -> None:
        """Every worker within its band (or the replacements' join grace and WAIT_S passed):
        each round's crash hits a balanced fleet, as the first does. The round before left
        its replacements short, and nothing is handed to them within their grace."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.join_grace_s + WAIT_S
        while loop.time() < deadline:
            held = [len(await w.held()) for w in self.workers]
            if within_band(held, len(self.ids)):
                return
            await asyncio.sleep(0.2)
        log.warning("fleet not balanced within its join grace and %ss", WAIT_S)

    async def settled(self) -> None:
        """Every connection has exactly one subscriber (or WAIT_S passed)."""
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            await self.refresh()
            if all(records.live_count(self.streams.get(c)) == 1 for c in self.ids):
                return
            await asyncio.sleep(0.1)
        log.warning("fleet did not settle within %ss", WAIT_S)
