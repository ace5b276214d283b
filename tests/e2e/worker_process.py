"""Worker processes for end-to-end tests: the dev stack's (entrypoints/devstack/workers.py),
`python -m entrypoints.worker` as a real subprocess, with the tests' short timings and the
tests' asyncio debug mode."""

import os
from collections.abc import Mapping
from pathlib import Path

from entrypoints.devstack.service import ROOT, child_env
from entrypoints.devstack.workers import WorkerProcess

__all__ = ["FAST", "ROOT", "WorkerProcess", "base_env", "worker_process"]

# Short timings (the lease stays long enough that a takeover within a couple of seconds can
# only be the graceful handoff, never an expiry).
FAST = {
    "WSFLEET_LEASE_MS": "10000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "1",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "3000",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    "WSFLEET_RECONCILE_INTERVAL_S": "30",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_CAPACITY_PAUSE_S": "0.5",
    "WSFLEET_SHUTDOWN_BUDGET_S": "6",
    "WSFLEET_INGEST_FLUSH_INTERVAL_S": "0.1",
    "WSFLEET_METRICS_INTERVAL_S": "2",
    "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": "1",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
}


def debug_mode() -> dict[str, str]:
    """The tests' asyncio debug mode (tests/conftest.py), kept in the processes they start:
    child_env drops it for the demo and the benchmarks, not here."""
    flag = os.environ.get("PYTHONASYNCIODEBUG")
    return {} if flag is None else {"PYTHONASYNCIODEBUG": flag}


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a process a test starts: the test's own without WSFLEET_*, plus
    `extra`."""
    return child_env({**debug_mode(), **extra})


def worker_process(name: str, env: Mapping[str, str], log_dir: Path) -> WorkerProcess:
    return WorkerProcess(name, log_dir, {**debug_mode(), **env})
