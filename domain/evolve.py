"""evolve(state, event) -> state, and fold(events) -> state: a connection is its history."""

from collections.abc import Iterable
from typing import Any

import attrs

from domain.errors import InvalidTransition
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
from domain.state import NO_OWNER, Connection, DesiredState, StopReason


def evolve(state: Connection | None, event: Event) -> Connection:
    """Apply one event. Raises InvalidTransition if it cannot follow `state`."""
    match event:
        case ConnectionStarted():  # the one event that needs no state before it
            return _started(state, event)
    if state is None:
        raise InvalidTransition(
            f"{type(event).__name__} on {event.connection_id!r}, which was never started"
        )
    if event.version != state.version + 1 or event.connection_id != state.connection_id:
        raise InvalidTransition(
            f"{type(event).__name__} v{event.version} cannot follow "
            f"{state.connection_id!r} v{state.version}"
        )
    return attrs.evolve(state, version=event.version, updated_at_ms=event.at_ms, **_changes(event))


def _started(state: Connection | None, event: ConnectionStarted) -> Connection:
    if state is not None:
        raise InvalidTransition(f"{event.connection_id!r} was already started")
    if event.version != 1:  # versions are contiguous from 1: a truncated history is refused
        raise InvalidTransition(
            f"ConnectionStarted of {event.connection_id!r} has version {event.version}, not 1"
        )
    return Connection(
        connection_id=event.connection_id,
        version=event.version,
        desired_state=DesiredState.STARTED,
        ws_url=event.ws_url,
        updated_at_ms=event.at_ms,
    )


def _changes(event: Event) -> dict[str, Any]:
    """What each event after the first changes, as attribute updates (version and
    updated_at_ms change for all)."""
    match event:
        case ConnectionRestarted(ws_url=ws_url):
            return {
                "desired_state": DesiredState.STARTED,
                "ws_url": ws_url,
                "stop_reason": None,
                "failures": 0,
                "not_before_ms": 0,
            }
        case StopRequested():
            return {"desired_state": DesiredState.STOPPED, "stop_reason": StopReason.REQUESTED}
        case LeaseAcquired(owner=owner, token=token) | LeaseTakenOver(owner=owner, token=token):
            return {"owner": owner, "token": token}
        case Checkpointed(seq=seq):
            return {"checkpoint_seq": seq, "failures": 0}
        case LeaseReleased():
            return {"owner": NO_OWNER}
        case StreamEnded():
            return {"desired_state": DesiredState.STOPPED, "stop_reason": StopReason.STREAM_ENDED}
        case UpstreamFailed(failures=failures, not_before_ms=not_before_ms):
            return {"failures": failures, "not_before_ms": not_before_ms}
    raise InvalidTransition(f"unknown event {type(event).__name__}")


def fold(events: Iterable[Event], state: Connection | None = None) -> Connection | None:
    for event in events:
        state = evolve(state, event)
    return state
