"""Events and states to plain dicts and back, for stores and APIs (still no I/O here)."""

from collections.abc import Mapping
from typing import Any, TypeVar, overload

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
    SessionExpired,
    SessionOpened,
    SessionRenewed,
    StopRequested,
    StreamEnded,
    UpstreamFailed,
)
from domain.redaction import redact_url

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


_E = TypeVar("_E", Event, SessionEvent)

SESSION_EVENT_TYPES: dict[str, type[SessionEvent]] = {
    cls.__name__: cls for cls in (SessionOpened, SessionRenewed, SessionEnded, SessionExpired)
}


@overload
def for_the_log(event: Event) -> Event: ...
@overload
def for_the_log(event: SessionEvent) -> SessionEvent: ...
@overload
def for_the_log(event: Event | SessionEvent) -> Event | SessionEvent: ...
def for_the_log(event: Event | SessionEvent) -> Event | SessionEvent:
    """`event` as the ownership log keeps it: an upstream URL with its credentials masked
    (domain.redaction). The log is the audit trail an operator reads; only the connection's
    state keeps the URL the worker connects to (folding the log gives the masked URL)."""
    match event:
        case ConnectionStarted(ws_url=url) | ConnectionRestarted(ws_url=url):
            return attrs.evolve(event, ws_url=redact_url(url))
    return event


def event_to_dict(event: Event | SessionEvent) -> dict[str, Any]:
    """`{"type": "LeaseAcquired", "connection_id": ..., "version": ..., "at_ms": ..., ...}`
    (a session event names its `session_id` instead)."""
    return {"type": type(event).__name__, **attrs.asdict(event)}


def event_from_dict(data: dict[str, Any]) -> Event:
    return _from_dict(data, EVENT_TYPES, "event")


def session_event_from_dict(data: dict[str, Any]) -> SessionEvent:
    return _from_dict(data, SESSION_EVENT_TYPES, "session event")


def _from_dict(data: dict[str, Any], types: Mapping[str, type[_E]], kind: str) -> _E:
    fields = dict(data)
    name = fields.pop("type", None)
    cls = types.get(str(name))
    if cls is None:
        raise InvalidTransition(f"unknown {kind} type {name!r}")
    names = {a.name for a in attrs.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})
