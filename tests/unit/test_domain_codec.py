"""The codec: every event survives a trip to a plain (JSON-safe) dict and back."""

import json
from typing import Any

import pytest

from domain import (
    Checkpointed,
    ConnectionRestarted,
    ConnectionStarted,
    Event,
    InvalidTransition,
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
from domain.codec import (
    EVENT_TYPES,
    SESSION_EVENT_TYPES,
    event_from_dict,
    event_to_dict,
    session_event_from_dict,
)

_COMMON: dict[str, Any] = {"connection_id": "conn-1", "version": 3, "at_ms": 1_700_000_000_123}
_LEASE: dict[str, Any] = {"owner": "session-a", "token": 4}

ONE_OF_EACH: list[Event] = [
    ConnectionStarted(**_COMMON, ws_url="wss://feeds.example.com/a?x=1"),
    ConnectionRestarted(**_COMMON, ws_url="wss://feeds.example.com/b"),
    StopRequested(**_COMMON),
    LeaseAcquired(**_COMMON, **_LEASE),
    LeaseTakenOver(**_COMMON, **_LEASE, previous_owner="session-b", previous_token=3),
    Checkpointed(**_COMMON, seq=99),
    LeaseReleased(**_COMMON, **_LEASE),
    StreamEnded(**_COMMON, **_LEASE),
    UpstreamFailed(**_COMMON, **_LEASE, failures=2, not_before_ms=1, reason="HTTP 503"),
]

_SESSION: dict[str, Any] = {"session_id": "worker-7/3f2a", "version": 2, "at_ms": 1_700_000_000_123}
ONE_OF_EACH_SESSION_EVENT: list[SessionEvent] = [
    SessionOpened(**_SESSION, expires_at_ms=1_700_000_006_123, capacity=10_000),
    SessionRenewed(**_SESSION, expires_at_ms=1_700_000_008_123, held=412, capacity=10_000),
    SessionEnded(**_SESSION, reason="SIGTERM: graceful shutdown"),
    SessionExpired(**_SESSION, expired_at_ms=1_700_000_008_123, found_by="w2-0badcafe#1"),
]


def _all_event_classes(cls: type[Any]) -> set[type[Any]]:
    found = set()
    for sub in cls.__subclasses__():
        if sub.__module__ == "domain.events":
            found |= {sub} | _all_event_classes(sub)
    return found


def test_every_event_type_is_known_to_the_codec_and_covered_here() -> None:
    assert set(EVENT_TYPES.values()) == _all_event_classes(Event)
    assert {type(e) for e in ONE_OF_EACH} == set(EVENT_TYPES.values())


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda event: type(event).__name__)
def test_codec_round_trips_every_event_type_through_json(event: Event) -> None:
    data = json.loads(json.dumps(event_to_dict(event)))

    assert data["type"] == type(event).__name__
    assert event_from_dict(data) == event


def test_decoding_ignores_fields_added_by_a_newer_writer() -> None:
    data = {**event_to_dict(ONE_OF_EACH[2]), "added_later": True}

    assert event_from_dict(data) == ONE_OF_EACH[2]


def test_decoding_an_unknown_event_type_is_refused_naming_it() -> None:
    with pytest.raises(InvalidTransition, match="unknown event type 'LeaseStolen'"):
        event_from_dict({"type": "LeaseStolen", **_COMMON})


def test_every_session_event_type_is_known_to_the_codec_and_covered_here() -> None:
    assert set(SESSION_EVENT_TYPES.values()) == _all_event_classes(SessionEvent)
    assert {type(e) for e in ONE_OF_EACH_SESSION_EVENT} == set(SESSION_EVENT_TYPES.values())


@pytest.mark.parametrize("event", ONE_OF_EACH_SESSION_EVENT, ids=lambda event: type(event).__name__)
def test_codec_round_trips_every_session_event_type_through_json(event: SessionEvent) -> None:
    data = json.loads(json.dumps(event_to_dict(event)))

    assert data["type"] == type(event).__name__
    assert session_event_from_dict({**data, "added_later": 1}) == event


def test_the_two_families_of_events_do_not_decode_as_each_other() -> None:
    """A session event in a connection's log (or the reverse) is refused, not misread."""
    with pytest.raises(InvalidTransition, match="unknown event type 'SessionEnded'"):
        event_from_dict(event_to_dict(ONE_OF_EACH_SESSION_EVENT[2]))
    with pytest.raises(InvalidTransition, match="unknown session event type 'StopRequested'"):
        session_event_from_dict(event_to_dict(ONE_OF_EACH[2]))
