"""Worker timings as WSFLEET_* variables: the benchmarks run the real worker process, which
reads its configuration from the environment only."""

import attrs

from application.config import WorkerConfig

BENCH_CONFIG = WorkerConfig().scaled(0.1)  # lease 2 s, heartbeat 0.5 s, desired-state 1 s


def worker_env(config: WorkerConfig) -> dict[str, str]:
    return {
        f"WSFLEET_{field.name.upper()}": str(getattr(config, field.name))
        for field in attrs.fields(WorkerConfig)
    }
