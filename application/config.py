"""Worker timings and limits, validated once. The lease is the worker session's: one
heartbeat per worker, so it can be short; docs/decisions.md justifies each default."""

from typing import Any

import attrs

from application.errors import ConfigurationError


def _positive(instance: object, attribute: "attrs.Attribute[Any]", value: float) -> None:
    if value <= 0:
        raise ConfigurationError(f"{attribute.name} must be positive, got {value}")


BALANCE_BY = ("count", "load")


@attrs.frozen
class WorkerConfig:
    # The worker session's lease: a crashed worker's connections are orphans this long after
    # its last renew at most.
    lease_ms: int = attrs.field(default=4_000, validator=_positive)
    heartbeat_interval_s: float = attrs.field(default=1.0, validator=_positive)
    # Stop trusting the session this long before it ends (measured from the start of the last
    # successful renew on the monotonic clock). Two workers never overlap while the skew
    # between their wall clocks plus store latency stays below this margin (docs/decisions.md).
    self_fence_margin_ms: int = attrs.field(default=1_000, validator=_positive)
    # How often a worker asks which of its connections were STOPPED (one indexed read).
    desired_state_interval_s: float = attrs.field(default=2.0, validator=_positive)
    # A connection's checkpoint is recorded in the store this often while it streams (and on
    # every release); a new owner after a crash resumes from what the sink shows stored past
    # it. With a sink that cannot say, everything after the checkpoint is received again.
    checkpoint_interval_s: float = attrs.field(default=3_600.0, validator=_positive)
    # Reconciliation wakes when the next lease can expire (the store says when), and at least
    # this often; jitter keeps the fleet from querying in lock-step.
    reconcile_interval_s: float = attrs.field(default=60.0, validator=_positive)
    reconcile_jitter_s: float = attrs.field(default=0.25, validator=attrs.validators.ge(0))
    reconcile_page_size: int = attrs.field(default=100, validator=_positive)
    max_connections: int = attrs.field(default=100, validator=_positive)
    # The most acquisitions one worker has in flight at once per loop; the actual number
    # adapts to the store's answers (application/worker/take_limit.py).
    take_concurrency: int = attrs.field(default=16, validator=_positive)
    poll_wait_s: float = attrs.field(default=20.0, validator=_positive)
    poll_batch: int = attrs.field(default=10, validator=attrs.validators.in_(range(1, 11)))
    # Hint receivers: one long poll, and helpers while the queue has a backlog and the room
    # would fill their batches (application/worker/loops.py poll_queue).
    poll_concurrency: int = attrs.field(default=4, validator=attrs.validators.in_(range(1, 11)))
    capacity_pause_s: float = attrs.field(default=5.0, validator=_positive)
    shutdown_budget_s: float = attrs.field(default=20.0, validator=_positive)
    # Upstream reconnects while holding the lease: capped, jittered exponential back-off.
    reconnect_base_s: float = attrs.field(default=0.5, validator=_positive)
    reconnect_max_s: float = attrs.field(default=15.0, validator=_positive)
    reconnect_attempts: int = attrs.field(default=6, validator=_positive)
    # After giving up, nobody retries the connection before this back-off (grows per failure).
    poison_backoff_base_s: float = attrs.field(default=30.0, validator=_positive)
    poison_backoff_max_s: float = attrs.field(default=900.0, validator=_positive)
    # Progress restarts the failure count only after streaming this long: a poison that sends
    # one good message on every connect still backs off longer each time.
    upstream_healthy_s: float = attrs.field(default=60.0, validator=_positive)
    ingest_buffer_messages: int = attrs.field(default=1_000, validator=_positive)
    # Also bounded in bytes: 1,000 messages of up to 1 MiB each would be a gigabyte.
    ingest_buffer_bytes: int = attrs.field(default=2 * 2**20, validator=_positive)
    # A seq this far ahead of the next one expected is an upstream fault, not a gap: taken as
    # the new checkpoint, it would drop every normal message after it as a replay.
    seq_jump_window: int = attrs.field(default=1_000_000, validator=_positive)
    ingest_flush_interval_s: float = attrs.field(default=0.2, validator=_positive)
    # Sink writer lanes, each with one batch in flight (IngestWriter): more keep a sink whose
    # requests take tens of milliseconds busy; each connection stays in one lane, in order.
    ingest_writers: int = attrs.field(default=1, validator=attrs.validators.in_(range(1, 65)))
    metrics_interval_s: float = attrs.field(default=30.0, validator=_positive)
    # Balance (domain/balance.py): a worker above its share hands off the excess by
    # the graceful path, at most this many per pass of its sessions watch (about once a
    # lease); one below it takes. Off: nobody hands off to balance, and anyone takes.
    balance: bool = True
    balance_handoffs_per_pass: int = attrs.field(default=10, validator=_positive)
    # A new worker is handed nothing to balance for this long after its session opened: it
    # takes its share of what comes meanwhile (STARTs, orphans, a rolling deploy's leavers'
    # connections, which then move once). Longer than a deploy's start-to-SIGTERM: ECS stops
    # an old task once the new one's health check passes (infra: every 15 s).
    join_grace_s: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    # What is balanced: "count" (connections) or "load" (connections weighted by their
    # smoothed message rates, domain/balance.py `cost`). docs/decisions.md ("Balancing by
    # load is the default") says why load is.
    balance_by: str = attrs.field(default="load", validator=attrs.validators.in_(BALANCE_BY))

    def __attrs_post_init__(self) -> None:
        if self.heartbeat_interval_s >= self.trusted_s:
            raise ConfigurationError(
                "heartbeat_interval_s must be shorter than the lease minus the self-fence margin "
                f"({self.heartbeat_interval_s}s vs {self.trusted_s}s)"
            )

    @property
    def trusted_s(self) -> float:
        """How long a session is trusted after the start of its last successful renew (the
        SessionKeeper's rule): the lease less the self-fence margin."""
        return (self.lease_ms - self.self_fence_margin_ms) / 1000

    def scaled(self, factor: float) -> "WorkerConfig":
        """The same shape at another speed (tests and benchmarks run at 1/10 or faster)."""
        return attrs.evolve(
            self,
            lease_ms=int(self.lease_ms * factor),
            heartbeat_interval_s=self.heartbeat_interval_s * factor,
            self_fence_margin_ms=max(1, int(self.self_fence_margin_ms * factor)),
            desired_state_interval_s=self.desired_state_interval_s * factor,
            checkpoint_interval_s=self.checkpoint_interval_s * factor,
            reconcile_interval_s=self.reconcile_interval_s * factor,
            reconcile_jitter_s=self.reconcile_jitter_s * factor,
            poll_wait_s=self.poll_wait_s * factor,
            capacity_pause_s=self.capacity_pause_s * factor,
            shutdown_budget_s=self.shutdown_budget_s * factor,
            reconnect_base_s=self.reconnect_base_s * factor,
            reconnect_max_s=self.reconnect_max_s * factor,
            poison_backoff_base_s=self.poison_backoff_base_s * factor,
            poison_backoff_max_s=self.poison_backoff_max_s * factor,
            upstream_healthy_s=self.upstream_healthy_s * factor,
            join_grace_s=self.join_grace_s * factor,
            ingest_flush_interval_s=self.ingest_flush_interval_s * factor,
            metrics_interval_s=self.metrics_interval_s * factor,
        )
