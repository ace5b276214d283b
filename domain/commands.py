"""Commands: what someone asks of a connection or a worker session. Imperative names; deciding
may refuse them. A connection's owner is a worker session (`session_id`)."""

import attrs


@attrs.frozen
class Start:
    """Open (or keep open) a stream to `ws_url`. Idempotent for the same URL."""

    connection_id: str
    ws_url: str


@attrs.frozen
class Stop:
    """Close the stream for good. Idempotent once stopped; unknown ids are refused."""

    connection_id: str


@attrs.frozen
class Acquire:
    """Take the lease for a live worker session, if the connection is wanted and nobody holds
    it (no owner, or an owner whose session is dead)."""

    connection_id: str
    session_id: str


@attrs.frozen
class Checkpoint:
    """Record the durably stored checkpoint while the lease is still the caller's. Written at a
    low rate (a heartbeat no longer carries it): a new owner after a crash asks the sink."""

    connection_id: str
    session_id: str
    token: int
    checkpoint_seq: int


@attrs.frozen
class Release:
    """Give the lease back (graceful shutdown, STOP honoured), recording the final checkpoint
    and why (`reason`, kept in the LeaseReleased event)."""

    connection_id: str
    session_id: str
    token: int
    checkpoint_seq: int
    reason: str = ""


@attrs.frozen
class EndStream:
    """The upstream closed the stream normally: the connection is finished, not broken."""

    connection_id: str
    session_id: str
    token: int
    checkpoint_seq: int


@attrs.frozen
class ReportUpstreamFailure:
    """The upstream kept failing: release and keep every worker away until `not_before_ms`.
    `healthy`: the upstream streamed well for a while during this lease (the worker's policy
    says how long); only then does progress restart the failure count (failures_after)."""

    connection_id: str
    session_id: str
    token: int
    checkpoint_seq: int
    not_before_ms: int
    reason: str
    healthy: bool = False


Command = Start | Stop | Acquire | Checkpoint | Release | EndStream | ReportUpstreamFailure


@attrs.frozen
class OpenSession:
    """A worker process joins the fleet under a new, never reused session id."""

    session_id: str
    lease_ms: int
    capacity: int


@attrs.frozen
class RenewSession:
    """The heartbeat: keep the session live for another `lease_ms` and report the load:
    `held` connections, receiving `rate_milli` thousandths of a message a second in all
    (smoothed: domain/balance.py `smoothed`)."""

    session_id: str
    lease_ms: int
    held: int
    capacity: int
    rate_milli: int = 0


@attrs.frozen
class EndSession:
    """End the session now: its connections may be taken at once. Only for a worker that is
    leaving or is known for certain to be gone; idempotent."""

    session_id: str
    reason: str


@attrs.frozen
class NoteExpiry:
    """Record that the session was found expired (not renewed in time, not ended) by
    `found_by`, the finder's own session id: the session's log then says when it died and who
    saw it. Refused for a live session; idempotent (the first finder's record stands); nothing
    for an ended session, whose SessionEnded says it already."""

    session_id: str
    found_by: str


SessionCommand = OpenSession | RenewSession | EndSession | NoteExpiry
