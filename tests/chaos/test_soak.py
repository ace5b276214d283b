"""The chaos soak (`make chaos`, never part of `make test`): consecutive runs alternating the
backends (CHAOS_BACKENDS, default aws, embedded and postgres), each a fresh deployment under
random faults — alone and overlapping — for CHAOS_RUN_MINUTES, until CHAOS_MINUTES have
passed; every run is judged in full. The numbers (runs, faults, checks, worst recovery per
fault) are printed at the end and written as JSON to CHAOS_REPORT (default
build/chaos-soak.json). CHAOS_BALANCE_BY=load soaks balancing by load, on skewed rates
(tests/chaos/scenarios.py, HOT)."""

import json
import os
import random
import time
from pathlib import Path

import pytest

from entrypoints.devstack.service import ROOT
from tests.chaos import sockets
from tests.chaos.backends import CONFIG
from tests.chaos.scenarios import SOAK_MENU, Outcome, describe, execute, soak_schedule

pytestmark = [
    pytest.mark.soak,
    pytest.mark.serial,
    pytest.mark.skipif(not sockets.available(), reason="attributes subscribers through /proc"),
]

MINUTES = float(os.environ.get("CHAOS_MINUTES", "10"))
RUN_MINUTES = float(os.environ.get("CHAOS_RUN_MINUTES", "2.5"))
BACKENDS = os.environ.get("CHAOS_BACKENDS", "aws,embedded,postgres").split(",")
FAULTS = [name for name in os.environ.get("CHAOS_FAULTS", "").split(",") if name]
# What the workers balance by (WSFLEET_BALANCE_BY); by load, two streams run hot.
BALANCE_BY = os.environ.get("CHAOS_BALANCE_BY", CONFIG.balance_by)


async def test_soak_keeps_every_promise_under_repeated_mixed_faults(
    tmp_path: Path, chaos_outcomes: list[Outcome], request: pytest.FixtureRequest
) -> None:
    aws = request.getfixturevalue("aws_session") if "aws" in BACKENDS else None
    postgres = request.getfixturevalue("postgres_server") if "postgres" in BACKENDS else None
    unknown = set(FAULTS) - set(SOAK_MENU)
    assert not unknown, f"CHAOS_FAULTS: unknown {sorted(unknown)}; choose from {sorted(SOAK_MENU)}"
    deadline = time.monotonic() + MINUTES * 60
    seeds = random.Random(os.environ.get("CHAOS_SEED"))
    failures: list[str] = []
    runs: list[Outcome] = []
    while time.monotonic() < deadline - 30:  # a run shorter than 30 s proves little
        backend = BACKENDS[len(runs) % len(BACKENDS)]
        minutes = min(RUN_MINUTES, (deadline - time.monotonic()) / 60)
        run_dir = tmp_path / f"run{len(runs):03d}-{backend}"
        run_dir.mkdir()
        seed = seeds.randrange(1_000_000)
        schedule = soak_schedule(minutes, FAULTS)
        outcome = await execute(
            backend, run_dir, seed, schedule, aws, postgres=postgres, balance_by=BALANCE_BY
        )
        runs.append(outcome)
        chaos_outcomes.append(outcome)
        if not outcome.ok:
            failures.append(f"{describe(outcome)}\n(logs in {run_dir})")
    _write_report(runs)
    assert runs, "CHAOS_MINUTES is too short for one run"
    assert not failures, "\n\n".join(failures[:3])


def _write_report(runs: list[Outcome]) -> None:
    path = Path(os.environ.get("CHAOS_REPORT", ROOT / "build" / "chaos-soak.json"))
    path.parent.mkdir(parents=True, exist_ok=True)
    document = [
        {
            "backend": o.backend,
            "seed": o.seed,
            "ok": o.ok,
            "faults": o.stats.faults,
            "checks": o.stats.checks + o.verdict.checks,
            "recoveries_s": o.stats.recoveries,
            "violations": o.violations + o.verdict.violations,
            "notes": o.verdict.notes,
        }
        for o in runs
    ]
    path.write_text(json.dumps(document, indent=1))
