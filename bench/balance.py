"""Balancing: new workers take their share. Real worker processes at the default
timings: 3 workers hold 300 connections (100 each, their capacity), 3 more join at once; the
time until every worker is within 10 % (or one connection) of the mean, the handoffs that took
(each a new subscriber on the simulator after the join), the gap each moved stream had without
a subscriber, then a quiet period with the handoffs in it (0: no oscillation), and the judgement
of every stream after a graceful stop: lost, duplicated, the most subscribers at once."""

import asyncio
import itertools
import logging
import random
import signal
from pathlib import Path
from typing import Any

from bench.backends import Backend
from bench.fleet import FleetRun, within_band
from bench.fleet_scenario import judge
from bench.stats import summary
from entrypoints.devstack import records
from entrypoints.devstack.records import wall_ms
from entrypoints.devstack.simulator import SimulatorProcess

log = logging.getLogger("bench.balance")
CONVERGE_WAIT_S = 120.0


def moves_between(streams: dict[str, Any], ids: list[str], since_ms: int, until_ms: int) -> int:
    """New subscribers in [since_ms, until_ms): each one a connection moved."""
    return sum(
        1
        for c in ids
        if c in streams
        for at in records.connects_since(streams[c], since_ms)
        if at < until_ms
    )


def moved_twice(streams: dict[str, Any], ids: list[str], since_ms: int, until_ms: int) -> int:
    """Connections subscribed to more than once in [since_ms, until_ms): moved twice."""
    return sum(
        1
        for c in ids
        if c in streams
        and sum(1 for at in records.connects_since(streams[c], since_ms) if at < until_ms) > 1
    )


def gaps_s(streams: dict[str, Any], ids: list[str], since_ms: int) -> list[float]:
    """Per handoff: the previous subscriber's disconnect to the next one's connect."""
    out = []
    for cid in ids:
        record = streams.get(cid)
        if record is None:
            continue
        ordered = sorted(record["connections"], key=lambda c: c["connected_at_ms"])
        for before, after in itertools.pairwise(ordered):
            moved = after["connected_at_ms"] >= since_ms
            if moved and before["disconnected_at_ms"] is not None:
                out.append((after["connected_at_ms"] - before["disconnected_at_ms"]) / 1000)
    return out


async def balanced(run: FleetRun, connections: int) -> None:
    """Until the fleet's workers are within band of the mean, and no connection moved for a
    couple of heartbeats (or CONVERGE_WAIT_S passed)."""
    deadline = asyncio.get_running_loop().time() + CONVERGE_WAIT_S
    while asyncio.get_running_loop().time() < deadline:
        held = [len(await w.held()) for w in run.workers]
        if within_band(held, connections):
            await asyncio.sleep(2.0)
            if held == [len(await w.held()) for w in run.workers]:
                return
        await asyncio.sleep(0.25)
    log.warning("the first workers did not balance within %ss", CONVERGE_WAIT_S)


async def run_balance(
    backend: Backend,
    sim: SimulatorProcess,
    log_dir: Path,
    *,
    workers: int = 3,
    joining: int = 3,
    connections: int = 300,
    quiet_s: float = 20.0,
) -> dict[str, Any]:
    run = FleetRun(backend, sim, log_dir, random.Random(14))
    converged_s: float | None = None
    loads: list[dict[str, int]] = []
    try:
        for _ in range(workers):
            await run.add_worker()
        run.ids = [f"{backend.name}-b{i:03d}" for i in range(connections)]
        await run.start_connections(run.ids, spacing_s=0.01)
        await run.settled()
        # The first workers balance the burst of STARTs among themselves first: moves of that
        # burst counted as the join's would read as the join moving connections twice.
        await balanced(run, connections)
        before = {w.name: len(await w.held()) for w in run.workers}
        launched_ms = wall_ms()
        await asyncio.gather(*(run.add_worker() for _ in range(joining)))
        # From when the last newcomer answers its health check: a process start-up (seconds
        # on a loaded machine) is not the balance's doing.
        joined_ms = wall_ms()
        deadline = asyncio.get_running_loop().time() + CONVERGE_WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            held = {w.name: len(await w.held()) for w in run.workers}
            loads.append({"at_ms": wall_ms() - joined_ms, **held})
            del loads[:-40]  # the last ten seconds of the approach
            if within_band(list(held.values()), connections):
                converged_s = (wall_ms() - joined_ms) / 1000
                break
            await asyncio.sleep(0.25)
        converged_ms = wall_ms()
        await asyncio.sleep(quiet_s)
        after = {w.name: len(await w.held()) for w in run.workers}
    finally:
        stopped_ms = wall_ms()
        for worker in run.workers:
            worker.signal(signal.SIGTERM)
        for worker in run.workers:
            await worker.exit_code(30)
        for worker in run.workers + run.retired:
            await worker.stop(grace_s=10)
    ended = wall_ms()
    streams = await run.refresh()
    verdict = await judge(backend, run.ids, streams, ended)
    return {
        "backend": backend.name,
        "engine": backend.engine,
        "workers": workers,
        "joining": joining,
        "connections": connections,
        "loads_before": before,
        "startup_s": (joined_ms - launched_ms) / 1000,
        "loads_approach": loads,
        "loads_after_quiet": after,
        "converged_s": converged_s,
        "handoffs": moves_between(streams, run.ids, launched_ms, stopped_ms),
        "handoffs_after_converged": moves_between(streams, run.ids, converged_ms, stopped_ms),
        # What the newcomers' even share is: the fewest moves that balance the join.
        "newcomers_share": connections * joining // (workers + joining),
        "moved_twice": moved_twice(streams, run.ids, launched_ms, stopped_ms),
        "quiet_s": quiet_s,
        "gap_s": summary(gaps_s(streams, run.ids, launched_ms)),
        "peak_subscribers": max(
            (int(streams[c]["peak_subscribers"]) for c in run.ids if c in streams), default=0
        ),
        "verdict": verdict,
    }
