"""The lease store port: durable connection and worker-session state, changed atomically.

A store implements two commands — `execute` (a connection command) and `execute_session` (a
worker-session command) — and a handful of queries. Each command is one atomic step whose
precondition is exactly the domain's (`domain.decide`, `domain.decide_session`): an adapter
must never grant what the domain would refuse, nor refuse what it would grant. The named
operations the worker, the router and the CLI call (`start`, `try_acquire`, `renew_session`…)
are mapped to those commands once, here, for every store; the two commands' read-decide-write
step is written once too, in `store_step.SteppedStore`, over each store's primitives. The
in-memory store (adapters/memory) runs it under a lock and is the reference;
tests/contract/test_store_contract.py holds every adapter to it.

Failure modes, for every method:
- a refused precondition raises the domain's error (ConnectionNotFound, ConnectionConflict,
  LeaseLost, LeaseUnavailable, ConnectionStopped, SessionNotLive, CheckpointRegressed,
  InvalidCommand); the named operations turn the expected refusals into plain outcomes
  (`try_acquire` -> None, `renew_session` -> None, `checkpoint` -> False);
- the store being unreachable, throttled or slow raises `StoreUnavailable`: the outcome is
  unknown (the write may or may not have been applied).

What a store must make atomic (the reason sessions and connections share one store): a
takeover checks the owner's session is dead and the acquirer's is live, and changes the
connection, in one step; on DynamoDB a transaction with a ConditionCheck on each session item.
"""

import abc
from collections.abc import AsyncIterator, Sequence

import attrs

from domain import (
    Acquire,
    Checkpoint,
    Command,
    Connection,
    ConnectionNotFound,
    ConnectionStopped,
    EndSession,
    EndStream,
    Event,
    LeaseLost,
    LeaseUnavailable,
    NoteExpiry,
    OpenSession,
    Release,
    RenewSession,
    ReportUpstreamFailure,
    SessionCommand,
    SessionEvent,
    SessionNotLive,
    Start,
    Stop,
    WorkerSession,
)


@attrs.frozen
class CommandResult:
    connection: Connection
    changed: bool  # False: the command found it so already (a repeated START or STOP, a
    # checkpoint that did not move); nothing was written
    # What the command recorded, as decided; empty when nothing changed, and for a checkpoint
    # written without a read (the DynamoDB heartbeat-free path decides nothing locally).
    events: tuple[Event, ...] = ()


@attrs.frozen
class SessionResult:
    session: WorkerSession
    changed: bool  # False: an EndSession of a session that had ended already


def check_page_size(page_size: int) -> None:
    """`iter_orphans`' argument rule, for every store: a page of none would page forever (or,
    in a range step, silently list nothing)."""
    if page_size < 1:
        raise ValueError(f"page_size must be positive, got {page_size}")


class ConnectionStore(abc.ABC):
    # -- what every store implements ---------------------------------------------------------

    @abc.abstractmethod
    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        """Decide `command` against the stored connection (and, for Acquire, the sessions of its
        owner and of the acquirer) at `now_ms` and apply the events atomically; ownership events
        (`domain.OWNERSHIP_EVENTS`) are appended to the connection's history in the same step.
        Raises the domain's refusal, or StoreUnavailable."""

    @abc.abstractmethod
    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        """The same for a worker session; SessionOpened, SessionEnded and SessionExpired go to
        its history."""

    @abc.abstractmethod
    async def get(self, connection_id: str) -> Connection | None:
        """The current state (strongly consistent), or None if never started."""

    @abc.abstractmethod
    async def get_session(self, session_id: str) -> WorkerSession | None:
        """A worker session (strongly consistent), or None if unknown or cleaned up."""

    @abc.abstractmethod
    async def list_sessions(self) -> Sequence[WorkerSession]:
        """Every session item, live or dead (few: one per worker process that has not been
        cleaned up). For reconciliation, balancing and operators."""

    @abc.abstractmethod
    def iter_orphans(self, now_ms: int, page_size: int) -> AsyncIterator[Sequence[Connection]]:
        """Every connection with `is_orphan` at `now_ms`, in pages of at most `page_size`,
        until all are returned: STARTED ones with no owner whose back-off is over, and those
        whose owner's session is dead (expired, ended or gone). Order unspecified. May lag
        behind writes by the index's consistency window; every acquire re-checks. A
        `page_size` below 1 raises ValueError (`check_page_size`) before anything is read."""

    @abc.abstractmethod
    async def next_available_at(self, now_ms: int) -> int | None:
        """The earliest back-off end >= now_ms among STARTED connections with no owner, or
        None: when an unowned connection becomes an orphan without any write, so a full scan
        can wake exactly then. (Sessions expiring are the other such instants: the worker
        reads them from `list_sessions`, which it watches anyway.)"""

    @abc.abstractmethod
    async def stop_requested(self, session_id: str) -> Sequence[str]:
        """Ids of the connections owned by `session_id` whose desired state is STOPPED
        (`Connection.stop_pending`): one indexed read, whatever the session holds."""

    @abc.abstractmethod
    async def owned_by(self, session_id: str) -> Sequence[str]:
        """Ids of the connections whose owner is `session_id`, whatever their desired state,
        sorted: one indexed read. For hinting a dead session's connections to the survivors
        (application/deaths.py). May lag behind writes by the index's consistency window."""

    @abc.abstractmethod
    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        """Delete a dead session's item once no connection names it as owner; True if it was
        deleted. A live session, or one that still owns a connection, is kept (False)."""

    @abc.abstractmethod
    async def history(self, connection_id: str) -> Sequence[Event]:
        """The ownership log of a connection in version order; empty if never started."""

    @abc.abstractmethod
    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        """SessionOpened, SessionEnded and SessionExpired of a session, in version order (kept
        after the session item is forgotten)."""

    @abc.abstractmethod
    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        """Up to `limit` connections, for operators (`wsfleet status`); order by id."""

    # -- the named operations, mapped to commands once for every store ------------------------

    async def start(self, connection_id: str, ws_url: str, now_ms: int) -> CommandResult:
        """Create the connection STARTED, restart a STOPPED one (keeping its checkpoint and
        token), or change nothing if it is STARTED with the same URL.
        Raises ConnectionConflict (STARTED with another URL), InvalidCommand."""
        return await self.execute(Start(connection_id, ws_url), now_ms)

    async def stop(self, connection_id: str, now_ms: int) -> CommandResult:
        """Set desired state STOPPED (idempotent: of two racing STOPs exactly one reports a
        change). The lease is left to its owner, which sees the STOP (`stop_requested`) and
        releases. Raises ConnectionNotFound."""
        return await self.execute(Stop(connection_id), now_ms)

    async def try_acquire(
        self, connection_id: str, session_id: str, now_ms: int
    ) -> Connection | None:
        """Take the lease for a live session if `Connection.is_orphan`; return the new state
        (new token, checkpoint to resume from). None if unknown, STOPPED, held by a live
        session (the caller's included), backing off, or if the caller's session is not live.
        Records LeaseAcquired or LeaseTakenOver."""
        granted = await self.acquire_lease(connection_id, session_id, now_ms)
        return None if granted is None else granted.connection

    async def acquire_lease(
        self, connection_id: str, session_id: str, now_ms: int
    ) -> CommandResult | None:
        """`try_acquire` with what it recorded: LeaseTakenOver among the events tells a
        takeover (the previous owner died without a final checkpoint) from a clean acquire."""
        try:
            return await self.execute(Acquire(connection_id, session_id), now_ms)
        except (ConnectionNotFound, ConnectionStopped, LeaseUnavailable, SessionNotLive):
            return None

    async def checkpoint(
        self, connection_id: str, session_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> bool:
        """Record the durably stored checkpoint while (session, token) still owns the
        connection; False if it does not. Not logged. Raises CheckpointRegressed."""
        try:
            await self.execute(Checkpoint(connection_id, session_id, token, checkpoint_seq), now_ms)
        except (LeaseLost, ConnectionNotFound):
            return False
        return True

    async def release(
        self,
        connection_id: str,
        session_id: str,
        token: int,
        checkpoint_seq: int,
        now_ms: int,
        *,
        reason: str = "",
    ) -> Connection:
        """Give the lease back with the final checkpoint and why (`reason`, in the log);
        allowed while owner and token still match, even after the session died. Raises
        LeaseLost if someone else took over."""
        command = Release(connection_id, session_id, token, checkpoint_seq, reason)
        return (await self.execute(command, now_ms)).connection

    async def end_stream(
        self, connection_id: str, session_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        """The upstream ended normally: record StreamEnded (desired state STOPPED) and release.
        Raises LeaseLost."""
        command = EndStream(connection_id, session_id, token, checkpoint_seq)
        return (await self.execute(command, now_ms)).connection

    async def report_upstream_failure(
        self,
        connection_id: str,
        session_id: str,
        token: int,
        checkpoint_seq: int,
        not_before_ms: int,
        reason: str,
        now_ms: int,
        *,
        healthy: bool = False,
    ) -> Connection:
        """Release after the upstream kept failing; nobody may acquire before `not_before_ms`.
        `healthy`: it streamed well for a while first (ReportUpstreamFailure). Raises LeaseLost."""
        command = ReportUpstreamFailure(
            connection_id, session_id, token, checkpoint_seq, not_before_ms, reason, healthy
        )
        return (await self.execute(command, now_ms)).connection

    async def open_session(
        self, session_id: str, lease_ms: int, capacity: int, now_ms: int
    ) -> WorkerSession:
        """Join the fleet under a new session id (InvalidCommand if the id was used)."""
        command = OpenSession(session_id, lease_ms, capacity)
        return (await self.execute_session(command, now_ms)).session

    async def renew_session(
        self,
        session_id: str,
        lease_ms: int,
        held: int,
        capacity: int,
        now_ms: int,
        rate_milli: int = 0,
    ) -> WorkerSession | None:
        """The heartbeat: one write per worker, which also reports the load (`rate_milli`:
        the smoothed messages a second received, in thousandths). None if the session is no
        longer live (it expired, was ended, or is unknown): its worker must fence every
        connection at once."""
        try:
            command = RenewSession(session_id, lease_ms, held, capacity, rate_milli)
            return (await self.execute_session(command, now_ms)).session
        except SessionNotLive:
            return None

    async def note_expiry(self, session_id: str, found_by: str, now_ms: int) -> bool:
        """Record in a session's history that `found_by` (the caller's own session id) found
        it expired at `now_ms`. True if this call recorded it; False if it was recorded
        already, the session ended (its SessionEnded says so), or it is unknown (forgotten).
        Raises InvalidCommand for a live session or a malformed `found_by`."""
        try:
            command = NoteExpiry(session_id, found_by)
            return (await self.execute_session(command, now_ms)).changed
        except SessionNotLive:
            return False

    async def end_session(self, session_id: str, reason: str, now_ms: int) -> bool:
        """End a session now (idempotent): its connections become orphans at once. True if
        this call ended it; False if it had ended already or is unknown."""
        try:
            return (await self.execute_session(EndSession(session_id, reason), now_ms)).changed
        except SessionNotLive:
            return False
