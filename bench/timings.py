"""Worker timings of the benchmarks: the real worker process reads its configuration from the
environment only (entrypoints/devstack/workers.py writes it there)."""

from application.config import WorkerConfig
from entrypoints.devstack.workers import worker_timings

# The defaults themselves (lease 4 s, heartbeat 1 s, STOP check 2 s): the targets
# are stated at the defaults, which are short enough to measure at full speed.
BENCH_CONFIG = WorkerConfig()


def worker_env(config: WorkerConfig) -> dict[str, str]:
    return worker_timings(config)
