"""LeaseKeeper: renews one lease and knows, on the monotonic clock, when it must stop trusting it.

Self-fencing: the lease is trusted until `lease_ms - self_fence_margin_ms` after the START of
the last successful renew (or acquire) call. The margin covers clock skew between workers and
store latency; past the deadline the session stops reading and writing even if the store is
unreachable, so it never overlaps with a new owner.

Hiccups do not lose leases: a StoreUnavailable is retried with back-off for as long as the
lease has time left, and a refused renew is resolved by looking at the stored item (our write
may have landed before its response was lost); only another owner or real expiry ends it.
"""

import logging

from application.errors import StoreUnavailable
from application.ports.metrics import LEASES_LOST, RENEW_LATENCY_MS, STORE_ERRORS
from application.worker.backoff import Backoff
from application.worker.context import WorkerContext
from domain import Connection

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, ctx: WorkerContext, acquired: Connection, acquire_started: float) -> None:
        self._ctx = ctx
        self.connection_id = acquired.connection_id
        self.token = acquired.token
        self.expires_at_ms = acquired.expires_at_ms
        self._trusted_s = (ctx.config.lease_ms - ctx.config.self_fence_margin_ms) / 1000
        self._deadline = acquire_started + self._trusted_s
        self.lost_to: str | None = None  # set when another owner provably holds the lease
        self._fenced = False
        self._backoff = Backoff(0.05 * ctx.config.heartbeat_interval_s, 1.0, ctx.rng)

    def valid(self) -> bool:
        """Trusted now. Once not, never again: a late renew success must not revive a lease
        whose messages were already dropped (that would leave a gap behind the checkpoint)."""
        if self._fenced:
            return False
        if self.lost_to is not None or self._ctx.clock.monotonic() >= self._deadline:
            self._fenced = True
            return False
        return True

    def superseded(self) -> None:
        """The sink saw a newer token: another owner holds the connection, whatever the
        store said at our last renew. Never trusted again."""
        if self.lost_to is None:
            self.lost_to = ""
            self._ctx.metrics.count(LEASES_LOST)
            log.info(
                "lease superseded (the sink holds a newer token)",
                extra=self._ctx.log_extra(self.connection_id, self.token),
            )

    def remaining_s(self) -> float:
        return self._deadline - self._ctx.clock.monotonic()

    async def renew(self, checkpoint_seq: int) -> bool:
        """Renew, retrying within the time left. False once the lease is gone for good."""
        ctx = self._ctx
        attempt = 0
        while self.valid():
            started = ctx.clock.monotonic()
            now_ms = ctx.clock.now_ms()
            try:
                result = await ctx.store.renew(
                    self.connection_id,
                    ctx.worker_id,
                    self.token,
                    ctx.config.lease_ms,
                    checkpoint_seq,
                    now_ms,
                )
                ctx.metrics.timing(RENEW_LATENCY_MS, (ctx.clock.monotonic() - started) * 1000)
                current = result.connection
                if not result.renewed and current is None:
                    current = await ctx.store.get(self.connection_id)
            except StoreUnavailable as exc:
                attempt += 1
                ctx.metrics.count(STORE_ERRORS)
                log.warning(
                    "renew failed, retrying within the lease: %s",
                    exc,
                    extra=ctx.log_extra(self.connection_id, self.token),
                )
                await ctx.clock.sleep(min(self._backoff.delay(attempt), max(0, self.remaining_s())))
                continue
            if result.renewed or self._still_ours(current, now_ms):
                assert current is not None
                self.expires_at_ms = current.expires_at_ms
                # Trust only what the stored expiry proves, measured from this call's start.
                margin_ms = ctx.config.self_fence_margin_ms
                trusted_s = (current.expires_at_ms - now_ms - margin_ms) / 1000
                self._deadline = max(self._deadline, started + min(self._trusted_s, trusted_s))
                return True
            self.lost_to = current.owner if current is not None else ""
            ctx.metrics.count(LEASES_LOST)
            log.info(
                "lease lost to %r",
                self.lost_to,
                extra=ctx.log_extra(self.connection_id, self.token),
            )
            return False
        return False

    def _still_ours(self, current: Connection | None, now_ms: int) -> bool:
        # A refused renew whose item still shows our owner, token and an unexpired lease means
        # an earlier attempt of ours landed (its response was lost): the lease is still ours.
        return current is not None and current.is_held_by(self._ctx.worker_id, self.token, now_ms)
