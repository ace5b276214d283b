"""Events: what happened to a connection or a worker session. Past tense, immutable, versioned
per aggregate.

`version` is the aggregate's version after the event; `at_ms` is the decision's `now`.
"""

import attrs


@attrs.frozen(kw_only=True)
class Event:
    connection_id: str
    version: int
    at_ms: int


@attrs.frozen(kw_only=True)
class ConnectionStarted(Event):
    ws_url: str


@attrs.frozen(kw_only=True)
class ConnectionRestarted(Event):
    """START after STOP: the connection is wanted again and keeps its checkpoint."""

    ws_url: str


@attrs.frozen(kw_only=True)
class StopRequested(Event):
    pass


@attrs.frozen(kw_only=True)
class LeaseAcquired(Event):
    """A lease granted on a connection that was never leased or was released cleanly.
    `owner` is the acquiring worker session; `free_since_ms` when the connection became free
    to take: its release, (re)start or the end of its back-off, whichever was last (0 in
    events recorded before it was kept)."""

    owner: str
    token: int
    free_since_ms: int = 0


@attrs.frozen(kw_only=True)
class LeaseTakenOver(Event):
    """A lease granted because the previous owner's session died without a release."""

    owner: str
    token: int
    previous_owner: str
    previous_token: int


@attrs.frozen(kw_only=True)
class Checkpointed(Event):
    """Every message up to `seq` is durably stored; progress also clears upstream failures."""

    seq: int


@attrs.frozen(kw_only=True)
class LeaseReleased(Event):
    """The owner gave the lease back; `checkpoint_seq` is where the next owner resumes after,
    `reason` why it was given back (shutdown, rebalance, stopped, stream ended, upstream
    failed, ...; empty in events recorded before it was kept)."""

    owner: str
    token: int
    checkpoint_seq: int = 0
    reason: str = ""


@attrs.frozen(kw_only=True)
class StreamEnded(Event):
    """The upstream finished the stream normally; the connection is now STOPPED."""

    owner: str
    token: int


@attrs.frozen(kw_only=True)
class UpstreamFailed(Event):
    owner: str
    token: int
    failures: int
    not_before_ms: int
    reason: str


# Events that change who owns a connection or whether it is wanted. Stores append these to the
# ownership log; renewals and checkpoints only touch the current state (one per heartbeat would
# multiply the log's write cost by the heartbeat rate for no extra explanatory power).
OWNERSHIP_EVENTS: tuple[type[Event], ...] = (
    ConnectionStarted,
    ConnectionRestarted,
    StopRequested,
    LeaseAcquired,
    LeaseTakenOver,
    LeaseReleased,
    StreamEnded,
    UpstreamFailed,
)


def is_ownership_event(event: Event) -> bool:
    return isinstance(event, OWNERSHIP_EVENTS)


@attrs.frozen(kw_only=True)
class SessionEvent:
    session_id: str
    version: int
    at_ms: int


@attrs.frozen(kw_only=True)
class SessionOpened(SessionEvent):
    expires_at_ms: int
    capacity: int


@attrs.frozen(kw_only=True)
class SessionRenewed(SessionEvent):
    """The heartbeat: the session lives on, with its worker's current load."""

    expires_at_ms: int
    held: int
    capacity: int
    rate_milli: int = 0  # messages a second received over all its connections, x 1000


@attrs.frozen(kw_only=True)
class SessionEnded(SessionEvent):
    """Ended on purpose: by its worker on a clean exit, or by whoever knows for certain that the
    worker is gone (a supervisor that reaped it, ECS reporting its task STOPPED)."""

    reason: str


@attrs.frozen(kw_only=True)
class SessionExpired(SessionEvent):
    """Found dead without having ended: its last renew ran out at `expired_at_ms`, and
    `found_by` (the finding worker's session) recorded it at `at_ms`. Once, by the first to
    find it."""

    expired_at_ms: int
    found_by: str


# Session events that stores log (the renewals only move the current state, as checkpoints do).
SESSION_LOG_EVENTS: tuple[type[SessionEvent], ...] = (SessionOpened, SessionEnded, SessionExpired)
