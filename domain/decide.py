"""decide(state, command, now_ms, sessions) -> events: the only place where a connection
command is judged.

Pure: the time and the worker sessions it may consult are arguments, nothing is read or
written. Every precondition here is the one each store must enforce atomically (a DynamoDB
transaction's conditions, one SQLite transaction). Only Acquire consults sessions: the
connection's owner (is it dead?) and the acquirer (is it live?).
"""

from typing import Any

from domain.commands import (
    Acquire,
    Checkpoint,
    Command,
    EndStream,
    Release,
    ReportUpstreamFailure,
    Start,
    Stop,
)
from domain.errors import (
    CheckpointRegressed,
    ConnectionConflict,
    ConnectionNotFound,
    ConnectionStopped,
    InvalidCommand,
    LeaseLost,
    LeaseUnavailable,
    SessionNotLive,
)
from domain.events import (
    Checkpointed,
    ConnectionRestarted,
    ConnectionStarted,
    Event,
    LeaseAcquired,
    LeaseReleased,
    LeaseTakenOver,
    StopRequested,
    StreamEnded,
    UpstreamFailed,
)
from domain.identifiers import validate_connection_id, validate_session_id, validate_ws_url
from domain.state import Connection, DesiredState, LeaseStatus, SessionLookup

NO_SESSIONS: SessionLookup = {}


class _Versions:
    """Hands out the next per-connection versions for the events of one decision."""

    def __init__(
        self, state: Connection | None, connection_id: str, now_ms: int, sessions: SessionLookup
    ) -> None:
        self._version = state.version if state else 0
        self.common: dict[str, Any] = {"connection_id": connection_id, "at_ms": now_ms}
        self.now_ms = now_ms
        self.sessions = sessions

    def next(self) -> dict[str, Any]:
        self._version += 1
        return {**self.common, "version": self._version}


def decide(
    state: Connection | None,
    command: Command,
    now_ms: int,
    sessions: SessionLookup = NO_SESSIONS,
) -> list[Event]:
    """Judge `command` against `state` at `now_ms`, with the worker `sessions` it names (a
    missing session is a dead one); return the events, or raise a DomainError."""
    validate_connection_id(command.connection_id)
    if state is not None and state.connection_id != command.connection_id:
        raise InvalidCommand("command and state name different connections")
    v = _Versions(state, command.connection_id, now_ms, sessions)
    # One dispatch style for commands and events, here, in evolve and in the adapters: a
    # `match` on the type (docs/decisions.md, "One dispatch style").
    match command:
        case Start():
            return _start(state, command, v)
        case Stop():
            return _stop(state, command, v)
        case Acquire():
            return _acquire(state, command, v)
        case Checkpoint():
            return _record_checkpoint(state, command, v)
        case Release():
            return _release(state, command, v)
        case EndStream():
            return _end_stream(state, command, v)
        case ReportUpstreamFailure():
            return _upstream_failed(state, command, v)
    raise InvalidCommand(f"unknown command {type(command).__name__}")


def _existing(state: Connection | None, connection_id: str) -> Connection:
    if state is None:
        raise ConnectionNotFound(f"connection {connection_id!r} was never started")
    return state


def _start(state: Connection | None, cmd: Start, v: _Versions) -> list[Event]:
    validate_ws_url(cmd.ws_url)
    if state is None:
        return [ConnectionStarted(**v.next(), ws_url=cmd.ws_url)]
    if state.desired_state is DesiredState.STOPPED:
        return [ConnectionRestarted(**v.next(), ws_url=cmd.ws_url)]
    if state.ws_url != cmd.ws_url:
        raise ConnectionConflict(
            f"connection {cmd.connection_id!r} is already started with a different ws_url; "
            "stop it first to change the URL"
        )
    return []  # a retried START changes nothing: not the lease, not the token, not the checkpoint


def _stop(state: Connection | None, cmd: Stop, v: _Versions) -> list[Event]:
    conn = _existing(state, cmd.connection_id)
    if conn.desired_state is DesiredState.STOPPED:
        return []
    return [StopRequested(**v.next())]


def _acquire(state: Connection | None, cmd: Acquire, v: _Versions) -> list[Event]:
    validate_session_id(cmd.session_id)
    conn = _existing(state, cmd.connection_id)
    now, sessions = v.now_ms, v.sessions
    acquirer = sessions.get(cmd.session_id)
    if acquirer is None or not acquirer.is_live(now):
        # A dead session must own nothing new: that is what lets its item be cleaned up once
        # its last connection moved on, and a worker that froze past its session take nothing.
        raise SessionNotLive(f"worker session {cmd.session_id!r} is not live")
    if conn.desired_state is DesiredState.STOPPED:
        raise ConnectionStopped(f"connection {cmd.connection_id!r} is stopped")
    status = conn.lease_status(now, sessions)
    if status is LeaseStatus.HELD:
        raise LeaseUnavailable(
            f"connection {cmd.connection_id!r} is leased by live session {conn.owner!r}"
        )
    if conn.not_before_ms >= now:
        raise LeaseUnavailable(
            f"connection {cmd.connection_id!r} is backing off after {conn.failures} upstream "
            f"failures for another {conn.not_before_ms - now} ms"
        )
    token = conn.token + 1
    if status is LeaseStatus.EXPIRED:
        return [
            LeaseTakenOver(
                **v.next(),
                owner=cmd.session_id,
                token=token,
                previous_owner=conn.owner,
                previous_token=conn.token,
            )
        ]
    # Free since its last change (a release, start or restart: nothing else changes an
    # unowned connection), or since its back-off ended.
    free_since = max(conn.updated_at_ms, conn.not_before_ms)
    return [LeaseAcquired(**v.next(), owner=cmd.session_id, token=token, free_since_ms=free_since)]


def _record_checkpoint(state: Connection | None, cmd: Checkpoint, v: _Versions) -> list[Event]:
    conn = _owned(state, cmd.connection_id, cmd.session_id, cmd.token, v)
    return _checkpoint(conn, cmd.checkpoint_seq, v)


def _release(state: Connection | None, cmd: Release, v: _Versions) -> list[Event]:
    conn = _owned(state, cmd.connection_id, cmd.session_id, cmd.token, v)
    return [
        *_checkpoint(conn, cmd.checkpoint_seq, v),
        _released(cmd.session_id, cmd.token, cmd.checkpoint_seq, cmd.reason[:200], v),
    ]


def _end_stream(state: Connection | None, cmd: EndStream, v: _Versions) -> list[Event]:
    conn = _owned(state, cmd.connection_id, cmd.session_id, cmd.token, v)
    events = _checkpoint(conn, cmd.checkpoint_seq, v)
    if conn.desired_state is DesiredState.STARTED:
        events.append(StreamEnded(**v.next(), owner=cmd.session_id, token=cmd.token))
    events.append(_released(cmd.session_id, cmd.token, cmd.checkpoint_seq, "stream ended", v))
    return events


def _upstream_failed(
    state: Connection | None, cmd: ReportUpstreamFailure, v: _Versions
) -> list[Event]:
    conn = _owned(state, cmd.connection_id, cmd.session_id, cmd.token, v)
    events = _checkpoint(conn, cmd.checkpoint_seq, v)
    progressed = bool(events) and cmd.healthy
    events.append(
        UpstreamFailed(
            **v.next(),
            owner=cmd.session_id,
            token=cmd.token,
            failures=failures_after(conn.failures, progressed=progressed),
            not_before_ms=cmd.not_before_ms,
            reason=cmd.reason[:500],
        )
    )
    events.append(_released(cmd.session_id, cmd.token, cmd.checkpoint_seq, "upstream failed", v))
    return events


def _released(owner: str, token: int, checkpoint_seq: int, reason: str, v: _Versions) -> Event:
    """The last event of every hand-back: its checkpoint (never behind the stored one: the
    hand-back refused a regression) and why, so that the log says where the stream stood."""
    return LeaseReleased(
        **v.next(), owner=owner, token=token, checkpoint_seq=checkpoint_seq, reason=reason
    )


def failures_after(previous: int, *, progressed: bool) -> int:
    """The failure count after an upstream failure: one when the lease made real progress
    (stored messages while streaming well), else one more than before. The worker reads it
    too, to choose the back-off it persists."""
    return 1 if progressed else previous + 1


def _owned(
    state: Connection | None, connection_id: str, session_id: str, token: int, v: _Versions
) -> Connection:
    """Release-like commands and checkpoints need owner and token to match; a lease whose
    session died but that nobody took over may still be released by its owner (it frees the
    connection sooner) and checkpointed (what it stored is stored)."""
    conn = _existing(state, connection_id)
    if conn.owner != session_id or conn.token != token:
        raise LeaseLost(_why_lost(conn, session_id, token))
    return conn


def _checkpoint(conn: Connection, seq: int, v: _Versions) -> list[Event]:
    if seq < conn.checkpoint_seq:
        raise CheckpointRegressed(
            f"checkpoint {seq} of {conn.connection_id!r} is behind the stored {conn.checkpoint_seq}"
        )
    if seq == conn.checkpoint_seq:
        return []
    return [Checkpointed(**v.next(), seq=seq)]


def _why_lost(conn: Connection, session_id: str, token: int) -> str:
    if conn.token != token and conn.owner not in ("", session_id):
        return (
            f"lease on {conn.connection_id!r} was taken over by {conn.owner!r} "
            f"(token {conn.token}, yours {token})"
        )
    return f"{session_id!r} no longer holds token {token} on {conn.connection_id!r}"


def positive(name: str, value: int) -> None:
    if value <= 0:
        raise InvalidCommand(f"{name} must be positive, got {value}")
