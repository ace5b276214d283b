"""The scenarios, each on a fresh SimFleet brought to steady state: every connection STARTed
through the router and streamed, the fleet balanced for `settle_s`. Times are virtual seconds.

- steady: `window_s` of nothing happening;
- az-loss: a third of the workers die at one instant, unreported (no release, no session end);
- deploy: every worker replaced in waves of a tenth, ECS's 100 %/200 %: a wave's new workers
  start, become healthy (`healthy_s`), then the wave's old ones get SIGTERM; the next wave
  starts once they have exited;
- az-loss-reported: the same AZ loss, and the supervisor reports each death (ECS's task
  STOPPED event through the Lambda, application/deaths.py) `REPORT_AFTER_S` later;
- deploy: every worker replaced in waves of a tenth, ECS's 100 %/200 %: a wave's new workers
  start, become healthy (`healthy_s`), then the wave's old ones get SIGTERM; the next wave
  starts once they have exited;
- brownout: every store request 10 times slower and 5 % of them throttled, for 60 s;
- scale-out: half the workers hold every connection, then the other half start at once; the
  window ends when every worker holds its share within one connection.
Each returns figures.py's measures of the fault's window."""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from application.config import WorkerConfig
from application.deaths import WorkerDeaths
from bench.sim.collector import Collector
from bench.sim.dynamodb import ModelledStore
from bench.sim.figures import Window, measure
from bench.sim.fleet import SimFleet, SimSize, peak_rss_mib

log = logging.getLogger("bench.sim")

SCENARIOS = ("steady", "az-loss", "az-loss-reported", "deploy", "brownout", "scale-out")
RECOVER_TIMEOUT_S = 300.0
# ECS emits a task's STOPPED state change within about a second of the process's exit, and
# EventBridge delivers it to the deaths Lambda in well under another (docs/deploy.md).
REPORT_AFTER_S = 1.0


async def bring_up(sim: SimFleet, settle_s: float, workers: int, placed: bool = True) -> float:
    """Start `workers` workers, then every connection, each worker taking its share at once
    (`placed`, SimFleet.start_placed) or through the router's hints (SimFleet.start_all);
    returns virtual seconds until all stream."""
    added = sim.clock.monotonic()
    sim.add_workers(workers)
    await sim.clock.advance(2.0, step_s=0.05)  # every session opened and renewed once
    began = sim.clock.monotonic()
    await (sim.start_placed() if placed else sim.start_all())
    took = await sim.run_until_streaming(RECOVER_TIMEOUT_S)
    # Balancing evens out the random placement only once the workers are past their join
    # grace (nobody hands a new worker anything before): the settle counts from its end.
    grace_left = sim.config.join_grace_s - (sim.clock.monotonic() - added)
    await sim.clock.advance(max(0.0, grace_left) + settle_s, step_s=0.05)
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
    window.stopped = sim.streams_of(victims)
    await asyncio.gather(*(sim.fleet.crash(name) for name in victims))
    window.note(f"{len(victims)} workers killed")
    await recover(sim, window)


async def az_loss_reported(sim: SimFleet, window: Window, window_s: float) -> None:
    """The AZ loss with its deaths reported: the supervisor's calls are the store's too, as
    the Lambda's are (counted under the caller "supervisor")."""
    victims = sim.live[: len(sim.live) // 3]
    window.stopped = sim.streams_of(victims)
    await asyncio.gather(*(sim.fleet.crash(name) for name in victims))
    window.note(f"{len(victims)} workers killed")
    await sim.clock.advance(REPORT_AFTER_S, step_s=0.05)
    deaths = WorkerDeaths(ModelledStore(sim.model, "supervisor"), sim.queue, sim.clock)
    reports = asyncio.gather(*(deaths.worker_died(name, "az loss") for name in victims))
    await sim.clock.run_until(reports.done, 60, step_s=0.05)
    outcomes = await reports
    hinted = sum(len(outcome.hinted) for outcome in outcomes)
    window.note(f"{len(victims)} deaths reported, {hinted} connections hinted")
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


async def scale_out(sim: SimFleet, window: Window, window_s: float) -> None:
    joining = sim.size.workers - len(sim.live)
    sim.add_workers(joining)
    window.note(f"{joining} workers joined {sim.size.workers - joining}")
    began = sim.clock.monotonic()
    while not _balanced(sim):
        if sim.clock.monotonic() - began > RECOVER_TIMEOUT_S:
            window.note(f"not balanced after {RECOVER_TIMEOUT_S} s: {_spread(sim)}")
            break
        await sim.clock.advance(1.0, step_s=0.05)
    else:
        window.note(f"balanced (held {_spread(sim)}) after {sim.clock.monotonic() - began:.0f} s")
    await sim.clock.advance(10.0, step_s=0.05)  # and nothing moves after


def _balanced(sim: SimFleet) -> bool:
    """Every live worker within one connection of its share."""
    held = sim.held()
    share = sim.size.connections / len(held)
    return all(math.floor(share) - 1 <= n <= math.ceil(share) + 1 for n in held)


def _spread(sim: SimFleet) -> str:
    held = sim.held()
    return f"{min(held)}-{max(held)} a worker"


async def recover(sim: SimFleet, window: Window) -> None:
    try:
        await sim.run_until_streaming(RECOVER_TIMEOUT_S)
    except TimeoutError:
        window.note(f"{sim.unowned()} connections still not streaming after {RECOVER_TIMEOUT_S} s")
    await sim.clock.advance(10.0, step_s=0.05)  # what the recovery itself still costs


PROGRESS_EVERY_S = 10.0


FREEZE_EVERY_S = 1.0


async def _freeze(sim: SimFleet) -> None:
    """The young generations collected and what survives them frozen, every FREEZE_EVERY_S
    virtual seconds (bench/sim/collector.py)."""
    while True:
        await sim.clock.sleep(FREEZE_EVERY_S)
        Collector.sweep()


async def _progress(sim: SimFleet, name: str) -> None:
    """A line every PROGRESS_EVERY_S virtual seconds at INFO: a long run says where it is."""
    wall, cpu = time.perf_counter(), time.process_time()
    while True:
        await sim.clock.sleep(PROGRESS_EVERY_S)
        held = sim.held() or [0]
        log.info(
            "%s %dx%d at %.0f virtual s: %d workers live, %d not streaming, %d moves so far, "
            "%d-%d a worker; wall %.0f s, CPU %.0f s, RSS %.0f MiB",
            name,
            sim.size.workers,
            sim.size.connections,
            sim.clock.monotonic(),
            len(sim.live),
            sim.unowned(),
            len(sim.upstream.gaps),
            min(held),
            max(held),
            time.perf_counter() - wall,
            time.process_time() - cpu,
            peak_rss_mib(),
        )


RUNS: dict[str, Callable[[SimFleet, Window, float], Awaitable[None]]] = {
    "steady": steady,
    "az-loss": az_loss,
    "az-loss-reported": az_loss_reported,
    "deploy": deploy,
    "brownout": brownout,
    "scale-out": scale_out,
}
# Workers running before the fault: all, except for the scale-out's half.
INITIAL: dict[str, Callable[[int], int]] = {"scale-out": lambda n: max(1, n // 2)}


def _all(workers: int) -> int:
    return workers


async def run_scenario(
    name: str,
    size: SimSize,
    *,
    settle_s: float = 30.0,
    window_s: float = 60.0,
    placed: bool = True,
    config: WorkerConfig | None = None,
) -> dict[str, Any]:
    """`placed`: the bring-up hands each worker its share (see bring_up); False: every
    connection STARTed through the router and picked up from its hint. `config`: the
    workers' (SimFleet's default otherwise)."""
    if name not in RUNS:
        raise ValueError(f"unknown scenario {name!r}; allowed: {', '.join(SCENARIOS)}")
    wall, cpu = time.perf_counter(), time.process_time()
    sim = SimFleet(size, config)
    with Collector() as collector:
        progress = asyncio.create_task(_progress(sim, name), name="sim-progress")
        freezing = asyncio.create_task(_freeze(sim), name="sim-gc-freeze")
        try:
            pickup_s = await bring_up(sim, settle_s, INITIAL.get(name, _all)(size.workers), placed)
            window = Window.open(sim)
            await RUNS[name](sim, window, window_s)
            figures = measure(sim, window)
        finally:
            progress.cancel()
            freezing.cancel()
            await asyncio.gather(progress, freezing, return_exceptions=True)
            await sim.close()
    figures.update(
        scenario=name,
        workers=size.workers,
        connections=size.connections,
        rate_per_s=size.rate_per_s,
        seed=size.seed,
        orphan_shards=size.shards,
        initial_pickup_s=round(pickup_s, 2),
        bring_up="placed" if placed else "router",
        wall_s=round(time.perf_counter() - wall, 1),
        peak_rss_mib=round(peak_rss_mib()),
        cpu_s=round(time.process_time() - cpu, 1),
        # The clock's steps (bench/sim/clock.py): rounds of the event loop run, and steps
        # that still had work ready after MAX_ROUNDS (0: every step ran all there was).
        loop_rounds=sim.clock.rounds,
        steps_capped=sim.clock.capped,
        gc_s=round(collector.seconds, 1),
        gc_collections=collector.collections,
    )
    log.info("%s", figures)
    return figures
