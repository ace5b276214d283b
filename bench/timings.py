"""Worker timings of the benchmarks: the real worker process reads its configuration from the
environment only (entrypoints/devstack/workers.py writes it there)."""

from application.config import WorkerConfig
from entrypoints.devstack.workers import worker_timings

BENCH_CONFIG = WorkerConfig().scaled(0.1)  # lease 2 s, heartbeat 0.5 s, desired-state 1 s


def worker_env(config: WorkerConfig) -> dict[str, str]:
    return worker_timings(config)
