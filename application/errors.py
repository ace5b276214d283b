"""Application errors: failures of the outside world, as the use cases see them.

ApplicationError
├── StoreUnavailable      the connection store did not answer or refused for now (throttled,
│                         timed out, network): the outcome of a write is UNKNOWN; retry or read back
├── QueueUnavailable      the notification queue did not answer
├── SinkUnavailable       the message sink did not take a batch (nothing or everything of it may
│                         be stored; writes are idempotent, so retrying is safe)
├── UpstreamError         the upstream stream failed
│   ├── UpstreamUnavailable   worth retrying with back-off (refused, dropped, 5xx, timeout)
│   └── UpstreamRejected      not worth retrying soon (4xx, bad URL, forbidden address)
└── ConfigurationError    a setting is invalid; names the setting and what is allowed
    └── WorkerIdInUse     another live worker runs under this worker id

Domain refusals (LeaseLost, ConnectionNotFound, ...) are DomainErrors and pass through unchanged.
"""


class ApplicationError(Exception):
    """Root of every error raised by use cases and ports."""


class StoreUnavailable(ApplicationError):
    pass


class QueueUnavailable(ApplicationError):
    pass


class SinkUnavailable(ApplicationError):
    pass


class SinkRefused(ApplicationError):
    """The sink stored every message of the batch except these, which retrying cannot store.
    Each is a (connection_id, seq) key:
    - `stale`: the stored row carries a newer fencing token (the writer lost its lease);
    - `conflicts`: the seq is stored already with different data (kept as stored);
    - `invalid`: the sink cannot store this message at all (too large, out of range)."""

    def __init__(
        self,
        *,
        stale: frozenset[tuple[str, int]] = frozenset(),
        conflicts: frozenset[tuple[str, int]] = frozenset(),
        invalid: frozenset[tuple[str, int]] = frozenset(),
    ) -> None:
        self.stale = stale
        self.conflicts = conflicts
        self.invalid = invalid
        super().__init__(
            f"sink refused {len(stale)} stale, {len(conflicts)} conflicting and "
            f"{len(invalid)} invalid messages"
        )


class UpstreamError(ApplicationError):
    pass


class UpstreamUnavailable(UpstreamError):
    pass


class UpstreamRejected(UpstreamError):
    pass


class ConfigurationError(ApplicationError):
    pass


class WorkerIdInUse(ConfigurationError):
    """A worker found a live session of its own worker id that it did not open: two processes
    under one id would renew, fence and end each other's sessions."""
