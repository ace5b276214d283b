"""evolve and fold: a connection is exactly its history, applied in version order."""

import attrs
import pytest

from domain import (
    Acquire,
    Checkpoint,
    Command,
    Connection,
    ConnectionStarted,
    Event,
    InvalidCommand,
    InvalidTransition,
    LeaseAcquired,
    Release,
    Start,
    Stop,
    StopRequested,
    decide,
    evolve,
    fold,
)
from tests.unit.domain_given import CID, T0, URL, leased, run, started


def test_folding_the_history_rebuilds_the_incrementally_evolved_state() -> None:
    state: Connection | None = None
    history: list[Event] = []
    steps: list[tuple[Command, int]] = [
        (Start(CID, URL), T0),
        (Acquire(CID, "s1"), T0 + 1),
        (Checkpoint(CID, "s1", 1, 7), T0 + 2),
        (Stop(CID), T0 + 3),
        (Release(CID, "s1", 1, 9), T0 + 4),
        (Start(CID, URL), T0 + 5),
    ]
    for command, now in steps:
        state, events = run(state, command, now)
        history += events

    assert fold(history) == state
    assert [e.version for e in history] == list(range(1, len(history) + 1))
    assert state is not None
    assert state.version == len(history)
    assert state.updated_at_ms == T0 + 5


def test_fold_of_no_events_is_no_connection() -> None:
    assert fold([]) is None


def test_evolve_rejects_a_repeated_version() -> None:
    conn = leased("s1")
    stale = StopRequested(connection_id=CID, version=conn.version, at_ms=T0)

    with pytest.raises(InvalidTransition, match=f"StopRequested v2 cannot follow {CID!r} v2"):
        evolve(conn, stale)


def test_evolve_rejects_a_skipped_version() -> None:
    conn = started()

    with pytest.raises(InvalidTransition, match="v3 cannot follow"):
        evolve(conn, StopRequested(connection_id=CID, version=3, at_ms=T0))


def test_evolve_rejects_a_first_event_that_is_not_version_one() -> None:
    """Versions are contiguous from 1; a history missing its beginning must not load."""
    with pytest.raises(InvalidTransition, match="version"):
        evolve(None, ConnectionStarted(connection_id=CID, version=2, at_ms=T0, ws_url=URL))


def test_evolve_rejects_an_event_on_an_unknown_connection() -> None:
    event = LeaseAcquired(connection_id=CID, version=1, at_ms=T0, owner="s1", token=1)

    with pytest.raises(
        InvalidTransition, match=f"LeaseAcquired on {CID!r}, which was never started"
    ):
        evolve(None, event)


def test_evolve_rejects_a_second_start_event() -> None:
    event = ConnectionStarted(connection_id=CID, version=2, at_ms=T0, ws_url=URL)

    with pytest.raises(InvalidTransition, match="already started"):
        evolve(started(), event)


def test_evolve_rejects_an_event_of_another_connection() -> None:
    with pytest.raises(InvalidTransition, match="cannot follow"):
        evolve(started(), StopRequested(connection_id="conn-2", version=2, at_ms=T0))


def test_evolve_rejects_an_event_type_it_does_not_know() -> None:
    @attrs.frozen(kw_only=True)
    class Renamed(Event):
        pass

    with pytest.raises(InvalidTransition, match="unknown event Renamed"):
        evolve(started(), Renamed(connection_id=CID, version=2, at_ms=T0))


def test_decide_refuses_a_state_of_another_connection() -> None:
    with pytest.raises(InvalidCommand, match="different connections"):
        decide(started(), Stop("conn-2"), T0)
