"""The connection store port: durable connection state with atomic, conditional operations.

Every operation is one atomic step whose precondition is exactly the domain's (`domain.decide`):
an adapter must never grant what `decide` would refuse, nor refuse what it would grant. The
in-memory store (adapters/memory) applies decide/evolve under a lock and is the reference; the
contract suite in tests/contract/test_store_contract.py holds every adapter to it.

Failure modes, for every method:
- a refused precondition is a normal outcome: `try_acquire` returns None, `renew` returns a
  `RenewResult` with `renewed=False`; the other commands raise the domain's error
  (ConnectionNotFound, ConnectionConflict, LeaseLost, CheckpointRegressed, InvalidCommand);
- the store being unreachable, throttled or slow raises `StoreUnavailable`: the outcome is
  unknown (the write may or may not have been applied).
"""

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

import attrs

from domain import Connection, DesiredState, Event


@attrs.frozen
class CommandResult:
    connection: Connection
    changed: bool  # False: a repeated START or STOP that found it so already; nothing written


@attrs.frozen
class RenewResult:
    renewed: bool
    # After a renew: the new state. After a refusal: the state that refused it, when the
    # store returns it for free (DynamoDB's ReturnValuesOnConditionCheckFailure), else None.
    connection: Connection | None


class ConnectionStore(Protocol):
    async def start(self, connection_id: str, ws_url: str, now_ms: int) -> CommandResult:
        """Create the connection STARTED, restart a STOPPED one (keeping its checkpoint and
        token), or change nothing if it is STARTED with the same URL.
        Raises ConnectionConflict (STARTED with another URL), InvalidCommand."""
        ...

    async def stop(self, connection_id: str, now_ms: int) -> CommandResult:
        """Set desired state STOPPED (idempotent: `changed` is False if it already was, decided
        atomically, so of two racing STOPs exactly one reports a change). The lease is left to
        its owner, which sees the STOP and releases. Raises ConnectionNotFound."""
        ...

    async def get(self, connection_id: str) -> Connection | None:
        """The current state (strongly consistent), or None if never started."""
        ...

    async def try_acquire(
        self, connection_id: str, worker_id: str, lease_ms: int, now_ms: int
    ) -> Connection | None:
        """Take the lease if `Connection.is_orphan(now_ms)`; return the new state (with the
        new token and the checkpoint to resume from). None if unknown, STOPPED, held by anyone
        (including the caller) or backing off. Records LeaseAcquired or LeaseTakenOver."""
        ...

    async def renew(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        lease_ms: int,
        checkpoint_seq: int,
        now_ms: int,
    ) -> RenewResult:
        """Extend the caller's unexpired lease to max(current expiry, now + lease_ms) and record
        `checkpoint_seq` (which must not be behind the stored one; when it advances, the
        failure count is cleared). One write; not appended to the history (cost)."""
        ...

    async def release(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        """Give the lease back with the final checkpoint; allowed while owner and token still
        match, even after expiry. Raises LeaseLost if someone else took over."""
        ...

    async def end_stream(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        """The upstream ended normally: record StreamEnded (desired state STOPPED) and release.
        Raises LeaseLost."""
        ...

    async def report_upstream_failure(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        checkpoint_seq: int,
        not_before_ms: int,
        reason: str,
        now_ms: int,
    ) -> Connection:
        """Release after the upstream kept failing; nobody may acquire before `not_before_ms`.
        Raises LeaseLost."""
        ...

    def iter_orphans(self, now_ms: int, page_size: int) -> AsyncIterator[Sequence[Connection]]:
        """Every connection with `is_orphan(now_ms)`, in pages of at most `page_size`, until
        all have been returned (not just the first page). Order unspecified. May lag behind
        writes by the index's consistency window (GSIs are eventually consistent)."""
        ...

    async def next_available_at(self, now_ms: int) -> int | None:
        """The earliest `available_at_ms` >= now_ms among STARTED connections, or None: when
        the next lease could expire, so reconciliation can wake exactly then."""
        ...

    async def desired_states(self, connection_ids: Sequence[str]) -> Mapping[str, DesiredState]:
        """Desired states of many connections in as few round trips as the store allows
        (any number of ids); ids that do not exist are absent from the result."""
        ...

    async def history(self, connection_id: str) -> Sequence[Event]:
        """The ownership log (`domain.OWNERSHIP_EVENTS`) of a connection in version order;
        empty if never started."""
        ...

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        """Up to `limit` connections, for operators (`wsfleet status`); order by id."""
        ...
