"""Schedules of faults, and one run from deployment to verdict.

`short_schedule`: every fault once, in an order where each starts from a healthy fleet, the
sink faults last (what `make test` runs per backend).
`soak_schedule`: random faults, alone and overlapping, until a deadline (what `make chaos`
repeats). `execute` opens a deployment, runs a schedule, shuts the
fleet down gracefully and judges everything; the outcome carries the numbers and, if anything
failed, the evidence.
"""

import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import attrs

from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.postgres import LocalPostgres
from tests.chaos import faults
from tests.chaos.backends import CONFIG, new_backend
from tests.chaos.harness import ChaosAbort, ChaosRun, Stats
from tests.chaos.judge import Verdict, evidence, judge

WORKERS = 3
CONNECTIONS = 12
RATE = 5.0  # messages/s per stream
# Balancing by load is soaked on skewed rates, what it is for: two of the twelve streams at
# four times the others' rate (each weighs 21 against 6: issue 27's hot feeds, scaled so that
# one hot stream never holds a worker above 1.25 times the mean of five workers).
HOT = {"c00": 4 * RATE, "c06": 4 * RATE}

Schedule = Callable[[ChaosRun], Awaitable[None]]


@attrs.define
class Outcome:
    backend: str
    seed: int
    stats: Stats
    verdict: Verdict
    violations: list[str]
    report: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations and not self.verdict.violations


async def short_schedule(run: ChaosRun) -> None:
    await run.add_workers(WORKERS)
    await faults.pickup(run, [f"c{i:02d}" for i in range(CONNECTIONS)])
    await faults.duplicates(run)
    await faults.crash(run, skew_other=True)
    await faults.store_hiccups(run)
    await faults.freeze(run)
    await faults.stop_race(run)
    await faults.outage(run)
    await faults.rolling_restart(run)
    await faults.restart_stopped(run)
    # Last, on the same fleet (a deployment and three workers fewer to start per backend than
    # a run of their own): the sink faults leave no owner lost, so nothing follows them.
    await faults.sink_faults(run)


async def kinesis_schedule(run: ChaosRun) -> None:
    """The Kinesis sink's own short run: a SIGKILL while every worker's sink writes slowly (a
    batch in flight most of the time), then a sink outage; judged like every run, with the
    stream's copies held to what the upstream replayed since a checkpoint."""
    await run.add_workers(2)
    await faults.pickup(run, [f"k{i:02d}" for i in range(6)])
    await faults.crash_during_batches(run)
    await faults.sink_faults(run, ["sink outage"])


# The soak's menu: name -> (weight, fault). CHAOS_FAULTS=freeze,crash narrows it.
SOAK_MENU: dict[str, tuple[float, Schedule]] = {
    "crash": (3, lambda r: faults.crash(r, skew_other=r.rng.random() < 0.5)),
    "freeze": (2, faults.freeze),
    "hiccups": (2, faults.store_hiccups),
    "deployment": (1, faults.rolling_restart),
    "outage": (1, lambda r: faults.outage(r, whole_fleet=r.rng.random() < 0.5)),
    "stop-race": (1, faults.stop_race),
    "duplicates": (1, faults.duplicates),
    "restart": (1, faults.restart_stopped),
    "overlapping": (2, faults.overlapping),
    "sink": (2, lambda r: faults.sink_faults(r, [r.rng.choice(list(faults.SINK_FAULTS))])),
    # Issue 14: workers join during store faults and take their share; soak only (two worker
    # start-ups and about eight leases: too long for `make test`'s short schedule).
    "join": (1, faults.join_during_faults),
}


def soak_schedule(minutes: float, names: Sequence[str] = ()) -> Schedule:
    menu = [SOAK_MENU[name] for name in names] if names else list(SOAK_MENU.values())

    async def schedule(run: ChaosRun) -> None:
        deadline = time.monotonic() + minutes * 60
        await run.add_workers(WORKERS)
        await faults.pickup(run, [f"c{i:02d}" for i in range(CONNECTIONS)])
        weights = [w for w, _ in menu]
        while time.monotonic() < deadline:
            (fault,) = run.rng.choices([f for _, f in menu], weights)
            await fault(run)
        await faults.restart_stopped(run)

    return schedule


async def execute(
    backend_name: str,
    run_dir: Path,
    seed: int,
    schedule: Schedule,
    aws: LocalAws | None = None,
    *,
    postgres: LocalPostgres | None = None,
    balance: bool = True,
    balance_by: str = CONFIG.balance_by,
) -> Outcome:
    """One run; `aws` is the session's local AWS (needed by the aws backend only), `postgres`
    its PostgreSQL server (the postgres backend's). `balance`: workers balance where the
    backend allows it (tests/chaos/backends.py, BALANCE_ON), by `balance_by`; by load, on
    skewed rates (HOT)."""
    backend = new_backend(backend_name, aws, postgres)
    hot = HOT if balance_by == "load" else {}
    run = ChaosRun(
        backend, run_dir, rate=RATE, seed=seed, balance=balance, balance_by=balance_by, hot=hot
    )
    verdict = Verdict()
    try:
        await run.open()
        emitted: dict[str, int] = {}
        scheduled = 0  # the faults that ended a worker before the final stop
        try:
            await schedule(run)
            scheduled = len(run.endings)
            emitted = await faults.finish(run)
        except ChaosAbort:
            pass  # the violation is recorded; judge what happened so far
        verdict = await judge(run, emitted)
        run.stats.moves = await run.moves(scheduled or len(run.endings))
        verdict.notes[:0] = run.notes
        outcome = Outcome(backend_name, seed, run.stats, verdict, run.violations)
        if not outcome.ok:
            outcome.report = await evidence(run, verdict.suspects | run.suspects)
        return outcome
    finally:
        await run.close()


def describe(outcome: Outcome) -> str:
    """The failure message: every violation, then the evidence."""
    lines = [f"chaos run on {outcome.backend} (seed {outcome.seed}) broke its promises:"]
    lines += [f"  {v}" for v in outcome.violations]
    lines += [f"  {v}" for v in outcome.verdict.violations]
    lines += [f"  note: {n}" for n in outcome.verdict.notes]
    return "\n".join(lines) + "\n\n" + outcome.report
