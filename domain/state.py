"""The Connection aggregate's state: what a connection should be doing and who holds its lease.

State is never edited in place: it is the fold of the connection's events (see `evolve`).
"""

import enum

import attrs

NO_OWNER = ""


class DesiredState(enum.Enum):
    """What the outside world asked for: a connection is either wanted or not."""

    STARTED = "STARTED"
    STOPPED = "STOPPED"


class LeaseStatus(enum.Enum):
    """Where a lease stands at a given instant; derived, never stored."""

    NEVER_LEASED = "NEVER_LEASED"
    HELD = "HELD"
    RELEASED = "RELEASED"
    EXPIRED = "EXPIRED"


class StopReason(enum.Enum):
    REQUESTED = "REQUESTED"  # a STOP command
    STREAM_ENDED = "STREAM_ENDED"  # the upstream closed the stream normally


@attrs.frozen
class Connection:
    """One upstream stream that should (or should no longer) be held open by exactly one worker.

    `token` is the fencing token of the latest lease ever granted: it rises by one with every
    acquire and is never reused, so a write tagged with an older token is provably stale.
    `checkpoint_seq` is the highest upstream sequence number durably stored; a new owner
    resumes from `checkpoint_seq + 1`. `failures` and `not_before_ms` keep a connection whose
    upstream keeps failing from being passed around the fleet in a hot loop.
    """

    connection_id: str
    version: int
    desired_state: DesiredState
    ws_url: str
    owner: str = NO_OWNER
    token: int = 0
    expires_at_ms: int = 0
    checkpoint_seq: int = 0
    failures: int = 0
    not_before_ms: int = 0
    stop_reason: StopReason | None = None
    updated_at_ms: int = 0

    def lease_status(self, now_ms: int) -> LeaseStatus:
        if self.token == 0:
            return LeaseStatus.NEVER_LEASED
        if self.owner == NO_OWNER:
            return LeaseStatus.RELEASED
        if self.expires_at_ms < now_ms:
            return LeaseStatus.EXPIRED
        return LeaseStatus.HELD

    def is_held_by(self, worker_id: str, token: int, now_ms: int) -> bool:
        return (
            self.owner == worker_id
            and self.token == token
            and self.lease_status(now_ms) is LeaseStatus.HELD
        )

    @property
    def available_at_ms(self) -> int:
        """The first instant after which the connection may be acquired (if STARTED).

        A held lease blocks until it expires; a back-off blocks until `not_before_ms`. Stores
        index this single number so "orphans" is one range query: `available_at_ms < now`.
        """
        return max(self.expires_at_ms, self.not_before_ms)

    def is_orphan(self, now_ms: int) -> bool:
        """Wanted, yet nobody holds it and nothing forbids taking it."""
        return self.desired_state is DesiredState.STARTED and self.available_at_ms < now_ms

    def lease_remaining_ms(self, now_ms: int) -> int:
        if self.lease_status(now_ms) is not LeaseStatus.HELD:
            return 0
        return self.expires_at_ms - now_ms

    @property
    def resume_from_seq(self) -> int:
        return self.checkpoint_seq + 1
