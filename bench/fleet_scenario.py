"""The fleet benchmark from start to verdict (see fleet.py for the faults and how they are
timed): start, rounds of faults, graceful stop of everything, then the judgement of every
connection: seqs lost or duplicated in the sink up to its final checkpoint, seqs the upstream
re-delivered (absorbed by the idempotent sink), and time with two subscribers at once."""

import asyncio
import logging
import random
import signal
from pathlib import Path
from typing import Any

from bench.backends import Backend
from bench.fleet import FleetRun
from bench.stats import summary
from bench.timings import BENCH_CONFIG
from entrypoints.devstack import records
from entrypoints.devstack.judge import judge_stream
from entrypoints.devstack.records import wall_ms
from entrypoints.devstack.simulator import SimulatorProcess

log = logging.getLogger("bench.fleet")


async def run_fleet(
    backend: Backend,
    sim: SimulatorProcess,
    log_dir: Path,
    *,
    workers: int = 3,
    connections: int = 36,
    rounds: int = 4,
    stops_per_round: int = 4,
    seed: int = 7,
    timings: float = 1.0,
) -> dict[str, Any]:
    """`timings`: the workers' timings as a part of the defaults (0.5: lease 2 s, heartbeat
    0.5 s, issue 27's "1/10 of the article's"), judged against the targets stated for them."""
    config = BENCH_CONFIG if timings == 1.0 else BENCH_CONFIG.scaled(timings)
    run = FleetRun(backend, sim, log_dir, random.Random(seed), config)
    began = wall_ms()
    try:
        for _ in range(workers):
            await run.add_worker()
        run.ids = [f"{backend.name}-c{i:03d}" for i in range(connections)]
        await run.start_connections(run.ids)
        await run.settled()
        for number in range(1, rounds + 1):
            log.info("%s round %d/%d", backend.name, number, rounds)
            await asyncio.sleep(1.0)  # let checkpoints move on between faults
            await run.balanced()
            await run.crash()
            await run.settled()
            await asyncio.sleep(1.0)
            await run.handoff()
            await run.settled()
            await run.stop_and_restart(stops_per_round)
            await run.settled()
        await asyncio.sleep(1.0)
    finally:
        for worker in run.workers:  # graceful: each releases with its final checkpoint
            worker.signal(signal.SIGTERM)
        for worker in run.workers:
            await worker.exit_code(10)  # a second SIGTERM would cut the shutdown short
        for worker in run.workers + run.retired:
            await worker.stop(grace_s=10)
    ended = wall_ms()
    streams = await run.refresh()
    verdict = await judge(backend, run.ids, streams, ended)
    return {
        "backend": backend.name,
        "engine": backend.engine,
        "workers": workers,
        "connections": connections,
        "rounds": rounds,
        "timings": timings,
        "lease_ms": config.lease_ms,
        "latency_s": {kind: summary(values) for kind, values in run.samples.items()},
        "samples_s": run.samples,
        "timeouts": run.timeouts,
        "faults": run.faults,
        "moves": records.moves_per_fault(run.faults, streams, ended, ("crash", "handoff")),
        "settled_s": {
            kind: summary(values)
            for kind, values in records.settled_per_fault(
                run.faults, streams, ended, ("crash", "handoff")
            ).items()
        },
        "verdict": verdict,
        "timeline": {
            "began_ms": began,
            "ended_ms": ended,
            "intervals": {c: records.intervals(streams[c], ended) for c in run.ids if c in streams},
        },
    }


async def judge(
    backend: Backend, ids: list[str], streams: dict[str, Any], ended_ms: int
) -> dict[str, Any]:
    lost = duplicated = redelivered = overlaps = beyond = 0
    worst: list[str] = []
    for cid in ids:
        state = await backend.store.get(cid)
        checkpoint = state.checkpoint_seq if state else 0
        facts = judge_stream(cid, streams.get(cid), checkpoint, await backend.seqs(cid), ended_ms)
        missing = len(facts.missing_below_checkpoint)
        lost += missing
        duplicated += facts.duplicated
        beyond += len(set(facts.beyond_checkpoint))
        redelivered += facts.redelivered
        overlaps += facts.overlap_ms > 0
        if missing:
            worst.append(f"{cid}: {missing} missing of 1..{checkpoint}")
    rewrites = await backend.rewrites()
    return {
        "lost": lost,
        "duplicated": duplicated,
        "stored_beyond_checkpoint": beyond,
        "redelivered_by_upstream": redelivered,
        "sink_rewrites": None if rewrites is None else sum(rewrites.values()),
        "connections_with_two_subscribers": overlaps,
        "examples": worst[:10],
    }
