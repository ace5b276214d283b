"""What a demo run does, and the worker settings it gives its processes.

Timings are short so the whole run takes well under two minutes: a 2 s lease renewed every
0.5 s, trusted until 0.6 s before it could expire, STOPs seen within 1 s, on both backends
(DynamoDB Local answers as fast as SQLite here). They scale with `--lease-ms`.
Each worker may hold one connection more than an even share: the burst of STARTs then spreads
over every worker (SQLite's lock is not fair, so one fast poller would otherwise take most),
and the fleet, which always has its full number of workers (a replacement starts as soon as
one is killed), has room for every connection.
"""

import math

import attrs

from entrypoints.cli.options import PREFIX


class DemoError(Exception):
    """The demo could not run as planned (a process failed to start, a phase timed out)."""


@attrs.frozen
class DemoOptions:
    backend: str = "embedded"
    sink: str = "sqlite"  # one the backend runs (entrypoints/settings/load.py SINKS_OF_BACKEND)
    endpoint_url: str | None = None
    data_dir: str | None = None
    connections: int = 30
    workers: int = 3
    rate: float = 5.0  # messages per second per stream
    lease_ms: int = 2000
    steady_s: float = 5.0  # how long each calm phase lasts
    live: bool = True
    json: bool = False
    keep: bool = False
    quick: bool = False

    @property
    def heartbeat_s(self) -> float:
        return self.lease_ms / 4000

    @property
    def fence_margin_ms(self) -> int:
        return round(self.lease_ms * 0.3)

    @property
    def desired_state_s(self) -> float:
        return self.lease_ms / 2000

    @property
    def max_per_worker(self) -> int:
        return math.ceil(self.connections / self.workers) + 1

    @property
    def recovery_timeout_s(self) -> float:
        """How long a takeover may take before the demo gives up on it."""
        return 3 * self.lease_ms / 1000 + 20

    def worker_environment(self) -> dict[str, str]:
        values: dict[str, object] = {
            "LEASE_MS": self.lease_ms,
            "HEARTBEAT_INTERVAL_S": self.heartbeat_s,
            "SELF_FENCE_MARGIN_MS": self.fence_margin_ms,
            "DESIRED_STATE_INTERVAL_S": self.desired_state_s,
            # The view's checkpoint column is the store's: recorded every few seconds here
            # (hourly by default); a takeover resumes from what the sink stored past it.
            "CHECKPOINT_INTERVAL_S": 3,
            "RECONCILE_INTERVAL_S": 5,
            "POLL_WAIT_S": 1,
            # One hint per receive: workers polling side by side share a burst of STARTs
            # instead of the first poller taking ten at once.
            "POLL_BATCH": 1,
            "CAPACITY_PAUSE_S": 0.5,
            # The crash's replacement is balanced toward once its join grace has passed: two
            # leases here, so the demo shows it within its wait (30 s by default, to outlast
            # a rolling deploy's start-to-SIGTERM).
            "JOIN_GRACE_S": 2 * self.lease_ms / 1000,
            "SHUTDOWN_BUDGET_S": 5,
            "MAX_CONNECTIONS": self.max_per_worker,
            "METRICS_INTERVAL_S": 10,
            "HINT_VISIBILITY_TIMEOUT_S": 5,
            "HEALTH_PORT": 0,  # several workers on one host: no port to share
            # The simulator listens on 127.0.0.1, which the SSRF rules refuse by default.
            "ALLOW_PRIVATE_UPSTREAMS": "true",
        }
        return {PREFIX + name: str(value) for name, value in values.items()}
