"""The two aggregates' states: a Connection (what it should be doing, which worker session owns
it) and a WorkerSession (one worker process's liveness, renewed on its heartbeat).

State is never edited in place: it is the fold of its events (see `evolve`). A connection's
lease has no expiry of its own: it is held while its owner's session is live, so a
heartbeat is one write per worker, not one per connection.
"""

import enum
from collections.abc import Mapping

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


class SessionStatus(enum.Enum):
    """Where a worker session stands at a given instant; derived, never stored."""

    LIVE = "LIVE"
    EXPIRED = "EXPIRED"  # not renewed in time: it can never be renewed again
    ENDED = "ENDED"  # ended on purpose (graceful exit, or a death that is known for certain)


# The capacity a shutting-down worker reports with every renew (`WorkerSession.leaving`).
LEAVING_CAPACITY = 0


@attrs.frozen
class WorkerSession:
    """One worker process's membership of the fleet. Renewed on the heartbeat; once expired or
    ended it is dead for good (a worker that comes back opens a new session with a new id), so
    a takeover that saw it dead can never be undone by a late renew.

    `held`, `capacity` and `rate_milli` (the smoothed messages a second its connections
    receive, in thousandths) are the load its worker reported with its last renew. A capacity
    of 0 says the worker is leaving (shutting down: it takes nothing, and what it holds is
    being handed over), as every renew of a shutting-down worker reports."""

    session_id: str
    version: int
    expires_at_ms: int
    held: int = 0
    capacity: int = 0
    rate_milli: int = 0
    ended_reason: str | None = None
    opened_at_ms: int = 0
    updated_at_ms: int = 0

    def status(self, now_ms: int) -> SessionStatus:
        if self.ended_reason is not None:
            return SessionStatus.ENDED
        if self.expires_at_ms < now_ms:
            return SessionStatus.EXPIRED
        return SessionStatus.LIVE

    def is_live(self, now_ms: int) -> bool:
        # `status(now_ms) is LIVE`, without making the status: every worker asks it of every
        # session in each view of the fleet (millions of times a minute in the simulation).
        return self.ended_reason is None and self.expires_at_ms >= now_ms

    @property
    def leaving(self) -> bool:
        """Its worker is shutting down: it reported a capacity of 0."""
        return self.capacity == LEAVING_CAPACITY

    @property
    def expiry_noted(self) -> bool:
        """SessionExpired is recorded. Read off the state rather than kept in a field of its
        own: nothing else moves a session that has not ended past its expiry (an open or a
        renew always sets the expiry after its own time), so no store's row needed a column
        for it (docs/decisions.md)."""
        return self.ended_reason is None and self.updated_at_ms > self.expires_at_ms


# The sessions a decision may consult, by id. A missing session is a dead one: its item was
# never written or was cleaned up after it died.
SessionLookup = Mapping[str, WorkerSession]


class StopReason(enum.Enum):
    REQUESTED = "REQUESTED"  # a STOP command
    STREAM_ENDED = "STREAM_ENDED"  # the upstream closed the stream normally


@attrs.frozen
class Connection:
    """One upstream stream that should (or should no longer) be held open by exactly one worker.

    `owner` is the worker session holding the lease (NO_OWNER when none); the lease is held
    while that session is live. `token` is the fencing token of the latest lease ever granted:
    it rises by one with every change of owner and is never reused, so a write tagged with an
    older token is provably stale.
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
    checkpoint_seq: int = 0
    failures: int = 0
    not_before_ms: int = 0
    stop_reason: StopReason | None = None
    updated_at_ms: int = 0

    def lease_status(self, now_ms: int, sessions: SessionLookup) -> LeaseStatus:
        """The one rule for whether a lease is held: it has an owner whose session is live."""
        if self.owner == NO_OWNER:
            return LeaseStatus.NEVER_LEASED if self.token == 0 else LeaseStatus.RELEASED
        session = sessions.get(self.owner)
        if session is None or not session.is_live(now_ms):
            return LeaseStatus.EXPIRED
        return LeaseStatus.HELD

    def is_held_by(self, session_id: str, token: int, now_ms: int, sessions: SessionLookup) -> bool:
        return (
            self.owner == session_id
            and self.token == token
            and self.lease_status(now_ms, sessions) is LeaseStatus.HELD
        )

    def is_orphan(self, now_ms: int, sessions: SessionLookup) -> bool:
        """Wanted, yet nobody holds it and nothing forbids taking it."""
        return (
            self.desired_state is DesiredState.STARTED
            and self.not_before_ms < now_ms
            and self.lease_status(now_ms, sessions) is not LeaseStatus.HELD
        )

    @property
    def stop_pending(self) -> bool:
        """STOPPED while still owned: its owner must close the stream and release. Stores index
        exactly these (by owner), so a worker learns of its STOPs at a cost that does not grow
        with the connections it holds."""
        return self.desired_state is DesiredState.STOPPED and self.owner != NO_OWNER

    @property
    def resume_from_seq(self) -> int:
        return self.checkpoint_seq + 1
