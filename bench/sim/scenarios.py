"""The scenarios, each on a fresh SimFleet brought to steady state: every connection STARTed
through the router and streamed, the fleet balanced for `settle_s`. Times are virtual seconds.

- steady: `window_s` of nothing happening;
- az-loss: a third of the workers die at one instant, unreported (no release, no session end);
- deploy: every worker replaced in waves of a tenth, ECS's 100 %/200 %: a wave's new workers
  start, become healthy (`healthy_s`), then the wave's old ones get SIGTERM; the next wave
  starts once they have exited;
- brownout: every store request 10 times slower and 5 % of them throttled, for 60 s.
Each returns figures.py's measures of the fault's window."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.sim.figures import Window, measure
from bench.sim.fleet import SimFleet, SimSize, peak_rss_mib

log = logging.getLogger("bench.sim")

SCENARIOS = ("steady", "az-loss", "deploy", "brownout")
RECOVER_TIMEOUT_S = 300.0


async def bring_up(sim: SimFleet, settle_s: float) -> float:
    """Start the workers, then every connection; returns virtual seconds until all stream."""
    sim.add_workers(sim.size.workers)
    await sim.clock.advance(2.0, step_s=0.05)  # every session opened and renewed once
    began = sim.clock.monotonic()
    await sim.start_all()
    took = await sim.run_until_streaming(RECOVER_TIMEOUT_S)
    await sim.clock.advance(settle_s, step_s=0.05)
    log.info(
        "%d workers x %d connections up in %.1f virtual s (wall %.0f s)",
        sim.size.workers,
        sim.size.connections,
        sim.clock.monotonic() - began,
        time.perf_counter() - sim.started_wall,
    )
    return took


async def steady(sim: SimFleet, window: Window, window_s: float) -> None:
    await sim.clock.advance(window_s, step_s=0.05)


async def az_loss(sim: SimFleet, window: Window, window_s: float) -> None:
    victims = sim.live[: len(sim.live) // 3]
    await asyncio.gather(*(sim.fleet.crash(name) for name in victims))
    window.note(f"{len(victims)} workers killed")
    await recover(sim, window)


async def deploy(sim: SimFleet, window: Window, window_s: float, healthy_s: float = 2.0) -> None:
    old = list(sim.live)
    wave = max(1, len(old) // 10)
    for i in range(0, len(old), wave):
        leaving = old[i : i + wave]
        sim.add_workers(len(leaving))
        await sim.clock.advance(healthy_s, step_s=0.05)
        for name in leaving:
            sim.fleet.members[name].worker.request_shutdown()
        await sim.clock.run_until(_exited(sim, leaving), 120, step_s=0.05)
    window.note(f"{len(old)} workers replaced in waves of {wave}")
    await recover(sim, window)


def _exited(sim: SimFleet, names: list[str]) -> Callable[[], bool]:
    tasks = [sim.fleet.members[name].task for name in names]
    return lambda: all(task.done() for task in tasks)


async def brownout(sim: SimFleet, window: Window, window_s: float) -> None:
    sim.model.latency_factor, sim.model.throttle_rate = 10.0, 0.05
    await sim.clock.advance(60.0, step_s=0.05)
    sim.model.latency_factor, sim.model.throttle_rate = 1.0, 0.0
    window.note("latency x10, 5 % throttled, 60 s")
    await recover(sim, window)


async def recover(sim: SimFleet, window: Window) -> None:
    try:
        await sim.run_until_streaming(RECOVER_TIMEOUT_S)
    except TimeoutError:
        window.note(f"{sim.unowned()} connections still not streaming after {RECOVER_TIMEOUT_S} s")
    await sim.clock.advance(10.0, step_s=0.05)  # what the recovery itself still costs


RUNS: dict[str, Callable[[SimFleet, Window, float], Awaitable[None]]] = {
    "steady": steady,
    "az-loss": az_loss,
    "deploy": deploy,
    "brownout": brownout,
}


async def run_scenario(
    name: str, size: SimSize, *, settle_s: float = 30.0, window_s: float = 60.0
) -> dict[str, Any]:
    if name not in RUNS:
        raise ValueError(f"unknown scenario {name!r}; allowed: {', '.join(SCENARIOS)}")
    wall = time.perf_counter()
    sim = SimFleet(size)
    try:
        pickup_s = await bring_up(sim, settle_s)
        window = Window.open(sim)
        await RUNS[name](sim, window, window_s)
        figures = measure(sim, window)
    finally:
        await sim.close()
    figures.update(
        scenario=name,
        workers=size.workers,
        connections=size.connections,
        rate_per_s=size.rate_per_s,
        seed=size.seed,
        initial_pickup_s=round(pickup_s, 2),
        wall_s=round(time.perf_counter() - wall, 1),
        peak_rss_mib=round(peak_rss_mib()),
    )
    log.info("%s", figures)
    return figures
