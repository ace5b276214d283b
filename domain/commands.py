"""Commands: what someone asks of a connection. Imperative names; deciding may refuse them."""

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
    """Take the lease for `lease_ms`, if the connection is wanted and nobody holds it."""

    connection_id: str
    worker_id: str
    lease_ms: int


@attrs.frozen
class Renew:
    """Extend the current owner's lease and record the durably stored checkpoint with it."""

    connection_id: str
    worker_id: str
    token: int
    lease_ms: int
    checkpoint_seq: int


@attrs.frozen
class Release:
    """Give the lease back (graceful shutdown, STOP honoured), recording the final checkpoint."""

    connection_id: str
    worker_id: str
    token: int
    checkpoint_seq: int


@attrs.frozen
class EndStream:
    """The upstream closed the stream normally: the connection is finished, not broken."""

    connection_id: str
    worker_id: str
    token: int
    checkpoint_seq: int


@attrs.frozen
class ReportUpstreamFailure:
    """The upstream kept failing: release and keep every worker away until `not_before_ms`."""

    connection_id: str
    worker_id: str
    token: int
    checkpoint_seq: int
    not_before_ms: int
    reason: str


Command = Start | Stop | Acquire | Renew | Release | EndStream | ReportUpstreamFailure
