"""Worker processes of a benchmarked fleet: the dev stack's (entrypoints/devstack/workers.py)
with the backend's command and the bench timings."""

from pathlib import Path

from application.config import WorkerConfig
from bench.backends import Backend
from bench.timings import BENCH_CONFIG, worker_env
from entrypoints.devstack.workers import WorkerProcess


def bench_worker(
    name: str,
    backend: Backend,
    log_dir: Path,
    max_connections: int,
    config: WorkerConfig = BENCH_CONFIG,
) -> WorkerProcess:
    env = {
        **worker_env(config),
        **backend.env,
        "WSFLEET_MAX_CONNECTIONS": str(max_connections),
        "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
        "WSFLEET_LOG_LEVEL": "INFO",
    }
    return WorkerProcess(name, log_dir, env, backend.worker_argv())
