"""Events and states to plain dicts and back, for stores and APIs (still no I/O here)."""

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
    SessionEnded,
    SessionEvent,
    SessionOpened,
    SessionRenewed,
    StopRequested,
    StreamEnded,
    UpstreamFailed,
)

EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        ConnectionStarted,
        ConnectionRestarted,
        StopRequested,
        LeaseAcquired,
        LeaseTakenOver,
        Checkpointed,
        LeaseReleased,
        StreamEnded,
        UpstreamFailed,
    )
}


SESSION_EVENT_TYPES: dict[str, type[SessionEvent]] = {
    cls.__name__: cls for cls in (SessionOpened, SessionRenewed, SessionEnded)
}


def event_to_dict(event: Event) -> dict[str, Any]:
    """`{"type": "LeaseAcquired", "connection_id": ..., "version": ..., "at_ms": ..., ...}`."""
    return {"type": type(event).__name__, **attrs.asdict(event)}


def event_from_dict(data: dict[str, Any]) -> Event:
    fields = dict(data)
    name = fields.pop("type", None)
    cls = EVENT_TYPES.get(str(name))
    if cls is None:
        raise InvalidTransition(f"unknown event type {name!r}")
    names = {a.name for a in attrs.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def session_event_to_dict(event: SessionEvent) -> dict[str, Any]:
    return {"type": type(event).__name__, **attrs.asdict(event)}


def session_event_from_dict(data: dict[str, Any]) -> SessionEvent:
    fields = dict(data)
    name = fields.pop("type", None)
    cls = SESSION_EVENT_TYPES.get(str(name))
    if cls is None:
        raise InvalidTransition(f"unknown session event type {name!r}")
    names = {a.name for a in attrs.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})
