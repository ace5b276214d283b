"""evolve(state, event) -> state, and fold(events) -> state: a connection is its history."""

from collections.abc import Callable, Iterable
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

_Change = Callable[[Any], dict[str, Any]]

# What each event changes, as attribute updates; version and updated_at_ms change for all.
_CHANGES: dict[type[Event], _Change] = {
    ConnectionRestarted: lambda e: {
        "desired_state": DesiredState.STARTED,
        "ws_url": e.ws_url,
        "stop_reason": None,
        "failures": 0,
        "not_before_ms": 0,
    },
    StopRequested: lambda e: {
        "desired_state": DesiredState.STOPPED,
        "stop_reason": StopReason.REQUESTED,
    },
    LeaseAcquired: lambda e: {"owner": e.owner, "token": e.token},
    LeaseTakenOver: lambda e: {"owner": e.owner, "token": e.token},
    Checkpointed: lambda e: {"checkpoint_seq": e.seq, "failures": 0},
    LeaseReleased: lambda e: {"owner": NO_OWNER},
    StreamEnded: lambda e: {
        "desired_state": DesiredState.STOPPED,
        "stop_reason": StopReason.STREAM_ENDED,
    },
    UpstreamFailed: lambda e: {"failures": e.failures, "not_before_ms": e.not_before_ms},
}


def evolve(state: Connection | None, event: Event) -> Connection:
    """Apply one event. Raises InvalidTransition if it cannot follow `state`."""
    if isinstance(event, ConnectionStarted):
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
    if state is None:
        raise InvalidTransition(
            f"{type(event).__name__} on {event.connection_id!r}, which was never started"
        )
    if event.version != state.version + 1 or event.connection_id != state.connection_id:
        raise InvalidTransition(
            f"{type(event).__name__} v{event.version} cannot follow "
            f"{state.connection_id!r} v{state.version}"
        )
    change = _CHANGES.get(type(event))
    if change is None:
        raise InvalidTransition(f"unknown event {type(event).__name__}")
    return attrs.evolve(state, version=event.version, updated_at_ms=event.at_ms, **change(event))


def fold(events: Iterable[Event], state: Connection | None = None) -> Connection | None:
    for event in events:
        state = evolve(state, event)
    return state
