"""Balancing by load against by count (issue 27): real worker processes at the bench timings.
One worker takes 4 hot streams (50 x the others' rate) and 6 quiet ones, 3 more join, 30 more
quiet ones start; then, for `wait_s`, the messages a second each worker receives (by the
streams' creation rates), and whether the busiest reaches 1.25 x the mean. Run once with
WSFLEET_BALANCE_BY=count and once with load, each on a fresh deployment of the same bench
run (bench/__main__.py, suite balance-skew)."""

import asyncio
import signal
from pathlib import Path
from typing import Any

from bench.backends import Backend
from bench.balance import moves_between
from bench.workers import bench_worker
from entrypoints.devstack.records import wall_ms
from entrypoints.devstack.simulator import SimulatorProcess
from entrypoints.devstack.workers import WorkerProcess

TARGET = 1.25  # the busiest worker's messages/s over the mean


async def run_balance_skew(
    backend: Backend,
    sim: SimulatorProcess,
    log_dir: Path,
    *,
    by: str,
    hot_rate: float = 20.0,
    cold_rate: float = 0.4,
    wait_s: float = 150.0,
) -> dict[str, Any]:
    rates: dict[str, float] = {}
    workers: list[WorkerProcess] = []

    async def add() -> None:
        worker = bench_worker(f"{backend.name}-{by}-w{len(workers) + 1}", backend, log_dir, 100)
        workers.append(worker)  # named before the next one is (three join at once)
        assert worker.env is not None
        worker.env["WSFLEET_BALANCE_BY"] = by
        await worker.start()
        await worker.wait_healthy()

    async def start(cid: str, rate: float) -> None:
        rates[cid] = rate
        await backend.router.start(cid, f"{sim.url(cid)}?rate={rate}")

    async def ratio() -> tuple[float, dict[str, float]]:
        held = {w.name: await w.held() for w in workers}
        per = {name: sum(rates.get(c, 0.0) for c in ids) for name, ids in held.items()}
        mean = sum(per.values()) / len(per)
        return (max(per.values()) / mean if mean else 0.0), per

    prefix = f"{backend.name}-{by}"
    reached_s: float | None = None
    samples: list[dict[str, Any]] = []
    try:
        await add()
        for i in range(4):
            await start(f"{prefix}-hot{i}", hot_rate)
        for i in range(6):
            await start(f"{prefix}-cold{i:02}", cold_rate)
        await asyncio.sleep(3)
        await asyncio.gather(*(add() for _ in range(3)))
        began = wall_ms()
        for i in range(6, 36):
            await start(f"{prefix}-cold{i:02}", cold_rate)
        while (wall_ms() - began) / 1000 < wait_s:
            await asyncio.sleep(2)
            busiest, per = await ratio()
            samples.append({"at_s": (wall_ms() - began) / 1000, "ratio": round(busiest, 2)})
            if reached_s is None and busiest <= TARGET and sum(per.values()) > 0:
                reached_s = (wall_ms() - began) / 1000
        final, per = await ratio()
        ended = wall_ms()
    finally:
        for worker in workers:
            worker.signal(signal.SIGTERM)
        for worker in workers:
            await worker.exit_code(30)
        for worker in workers:
            await worker.stop(grace_s=10)
    streams = await sim.records()
    return {
        "backend": backend.name,
        "by": by,
        # New subscribers after the 3 joined: each a connection placed or moved.
        "moves": moves_between(streams, list(rates), began, ended),
        "moves_last_60_s": moves_between(streams, list(rates), ended - 60_000, ended),
        "busiest_over_mean": round(final, 2),
        "messages_per_s": {k: round(v, 1) for k, v in per.items()},
        "within_target_at_s": reached_s,
        "ratio_samples": samples[-10:],
        "wait_s": wait_s,
    }
