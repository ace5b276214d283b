"""decide_session / evolve_session: the worker session aggregate, judged and folded.

A session is the fleet's unit of liveness: one per worker process, the only thing renewed on
the heartbeat. Once dead (expired or ended) it stays dead, so a takeover decided on its death
cannot be contradicted by a renew that arrives late.
"""

from collections.abc import Iterable
from typing import Any

import attrs

from domain.commands import EndSession, NoteExpiry, OpenSession, RenewSession, SessionCommand
from domain.decide import positive
from domain.errors import InvalidCommand, InvalidTransition, SessionNotLive
from domain.events import (
    SessionEnded,
    SessionEvent,
    SessionExpired,
    SessionOpened,
    SessionRenewed,
)
from domain.identifiers import validate_session_id
from domain.state import SessionStatus, WorkerSession


def decide_session(
    state: WorkerSession | None, command: SessionCommand, now_ms: int
) -> list[SessionEvent]:
    """Judge a session command at `now_ms`; return the events, or raise a DomainError."""
    validate_session_id(command.session_id)
    if state is not None and state.session_id != command.session_id:
        raise InvalidCommand("command and state name different sessions")
    common: dict[str, Any] = {
        "session_id": command.session_id,
        "version": (state.version if state else 0) + 1,
        "at_ms": now_ms,
    }
    match command:
        case OpenSession(lease_ms=lease_ms, capacity=capacity):
            positive("lease_ms", lease_ms)
            _not_negative("capacity", capacity)
            if state is not None:
                raise InvalidCommand(f"worker session id {command.session_id!r} was used before")
            return [SessionOpened(**common, expires_at_ms=now_ms + lease_ms, capacity=capacity)]
        case RenewSession(lease_ms=lease_ms, held=held, capacity=capacity):
            positive("lease_ms", lease_ms)
            _not_negative("held", held)
            _not_negative("capacity", capacity)
            _not_negative("rate_milli", command.rate_milli)
            if state is None or not state.is_live(now_ms):
                status = "unknown" if state is None else state.status(now_ms).value.lower()
                raise SessionNotLive(f"worker session {command.session_id!r} is {status}")
            return [
                SessionRenewed(
                    **common,
                    # A renew never shortens the session, even if asked for a shorter lease.
                    expires_at_ms=max(state.expires_at_ms, now_ms + lease_ms),
                    held=held,
                    capacity=capacity,
                    rate_milli=command.rate_milli,
                )
            ]
        case EndSession(reason=reason):
            if state is None:
                raise SessionNotLive(f"worker session {command.session_id!r} is unknown")
            if state.ended_reason is not None:
                return []  # ended already: the first reason stands
            return [SessionEnded(**common, reason=reason[:200] or "ended")]
        case NoteExpiry(found_by=found_by):
            if not 1 <= len(found_by) <= 256 or not found_by.isprintable():
                raise InvalidCommand("found_by must be the finder's session id, 1-256 printable")
            if state is None:
                raise SessionNotLive(f"worker session {command.session_id!r} is unknown")
            found = state.status(now_ms)
            if found is SessionStatus.LIVE:
                raise InvalidCommand(
                    f"worker session {command.session_id!r} has not expired: it is live "
                    f"until {state.expires_at_ms} (now {now_ms})"
                )
            if found is SessionStatus.ENDED or state.expiry_noted:
                return []  # its end is in the log already, or the first finder's record is
            return [SessionExpired(**common, expired_at_ms=state.expires_at_ms, found_by=found_by)]
    raise InvalidCommand(f"unknown session command {type(command).__name__}")


def evolve_session(state: WorkerSession | None, event: SessionEvent) -> WorkerSession:
    """Apply one session event. Raises InvalidTransition if it cannot follow `state`."""
    match event:
        case SessionOpened():
            if state is not None or event.version != 1:
                raise InvalidTransition(f"session {event.session_id!r} cannot be opened twice")
            return WorkerSession(
                session_id=event.session_id,
                version=1,
                expires_at_ms=event.expires_at_ms,
                capacity=event.capacity,
                opened_at_ms=event.at_ms,
                updated_at_ms=event.at_ms,
            )
    if state is None or event.version != state.version + 1:
        raise InvalidTransition(
            f"{type(event).__name__} v{event.version} cannot follow session {event.session_id!r}"
        )
    common: dict[str, Any] = {"version": event.version, "updated_at_ms": event.at_ms}
    match event:
        case SessionRenewed(expires_at_ms=expires_at_ms, held=held, capacity=capacity):
            return attrs.evolve(
                state,
                **common,
                expires_at_ms=expires_at_ms,
                held=held,
                capacity=capacity,
                rate_milli=event.rate_milli,
            )
        case SessionEnded(reason=reason):
            return attrs.evolve(state, **common, ended_reason=reason)
        case SessionExpired():
            if state.ended_reason is not None or event.at_ms <= state.expires_at_ms:
                raise InvalidTransition(
                    f"SessionExpired at {event.at_ms} cannot follow session "
                    f"{event.session_id!r}, which ended or is live until {state.expires_at_ms}"
                )
            return attrs.evolve(state, **common)  # updated past the expiry: `expiry_noted`
    raise InvalidTransition(f"unknown session event {type(event).__name__}")


def fold_session(
    events: Iterable[SessionEvent], state: WorkerSession | None = None
) -> WorkerSession | None:
    for event in events:
        state = evolve_session(state, event)
    return state


def _not_negative(name: str, value: int) -> None:
    if value < 0:
        raise InvalidCommand(f"{name} must not be negative, got {value}")
