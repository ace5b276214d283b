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
    LeaseRenewed,
    LeaseTakenOver,
    StopRequested,
    StreamEnded,
    UpstreamFailed,
)
from domain.codec import EVENT_TYPES, event_from_dict, event_to_dict

_COMMON: dict[str, Any] = {"connection_id": "conn-1", "version": 3, "at_ms": 1_700_000_000_123}
_LEASE: dict[str, Any] = {"owner": "worker-a", "token": 4, "expires_at_ms": 1_700_000_010_123}

ONE_OF_EACH: list[Event] = [
    ConnectionStarted(**_COMMON, ws_url="wss://feeds.example.com/a?x=1"),
    ConnectionRestarted(**_COMMON, ws_url="wss://feeds.example.com/b"),
    StopRequested(**_COMMON),
    LeaseAcquired(**_COMMON, **_LEASE),
    LeaseTakenOver(
        **_COMMON,
        **_LEASE,
        previous_owner="worker-b",
        previous_token=3,
        previous_expires_at_ms=1_700_000_000_000,
    ),
    LeaseRenewed(**_COMMON, **_LEASE),
    Checkpointed(**_COMMON, seq=99),
    LeaseReleased(**_COMMON, owner="worker-a", token=4),
    StreamEnded(**_COMMON, owner="worker-a", token=4),
    UpstreamFailed(
        **_COMMON, owner="worker-a", token=4, failures=2, not_before_ms=1, reason="HTTP 503"
    ),
]


def _all_event_classes(cls: type[Event]) -> set[type[Event]]:
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
