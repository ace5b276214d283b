"""START and STOP: the desired state, which the outside world controls."""

import pytest

from domain import (
    Acquire,
    ConnectionConflict,
    ConnectionNotFound,
    ConnectionRestarted,
    ConnectionStarted,
    ConnectionStopped,
    DesiredState,
    InvalidCommand,
    LeaseStatus,
    LeaseUnavailable,
    ReportUpstreamFailure,
    Start,
    Stop,
    StopReason,
    StopRequested,
    decide,
)
from tests.unit.domain_given import (
    CID,
    LEASE_MS,
    OTHER_URL,
    T0,
    URL,
    checkpointed,
    leased,
    run,
    started,
)


def test_start_of_new_connection_is_started_and_never_leased() -> None:
    conn, events = run(None, Start(CID, URL), T0)

    assert events == [ConnectionStarted(connection_id=CID, version=1, at_ms=T0, ws_url=URL)]
    assert conn.desired_state is DesiredState.STARTED
    assert conn.ws_url == URL
    assert conn.lease_status(T0) is LeaseStatus.NEVER_LEASED
    assert conn.is_orphan(T0 + 1)


def test_retried_start_keeps_lease_token_and_checkpoint() -> None:
    """The article's put_item overwrote these: a retried START caused a double claim."""
    conn = checkpointed(seq=41, worker="w1")

    assert decide(conn, Start(CID, URL), T0 + 5) == []
    assert conn.is_held_by("w1", conn.token, T0 + 5)
    assert conn.checkpoint_seq == 41


def test_start_with_other_url_while_started_is_a_conflict() -> None:
    conn = leased("w1")

    with pytest.raises(ConnectionConflict, match=f"{CID!r}.*stop it first"):
        decide(conn, Start(CID, OTHER_URL), T0 + 1)


def test_start_with_a_non_websocket_url_is_refused() -> None:
    with pytest.raises(InvalidCommand, match="ws:// or wss://"):
        decide(None, Start(CID, "https://feeds.example.com/a"), T0)


def test_stop_of_unknown_connection_is_refused() -> None:
    """The article's update_item silently created a half-formed item instead."""
    with pytest.raises(ConnectionNotFound, match=f"{CID!r} was never started"):
        decide(None, Stop(CID), T0)


def test_stop_marks_the_connection_stopped_and_leaves_the_lease_to_its_owner() -> None:
    conn, events = run(leased("w1"), Stop(CID), T0 + 1)

    assert [type(e) for e in events] == [StopRequested]
    assert conn.desired_state is DesiredState.STOPPED
    assert conn.stop_reason is StopReason.REQUESTED
    assert conn.is_held_by("w1", conn.token, T0 + 1)  # the owner sees STOP and releases
    assert not conn.is_orphan(T0 + LEASE_MS + 1)


def test_repeated_stop_changes_nothing() -> None:
    conn = run(started(), Stop(CID), T0)[0]

    assert decide(conn, Stop(CID), T0 + 1) == []


def test_stopped_connection_is_never_acquired() -> None:
    conn = run(started(), Stop(CID), T0)[0]

    for now in (T0, T0 + 1, T0 + 10 * LEASE_MS):
        with pytest.raises(ConnectionStopped, match=f"{CID!r} is stopped"):
            decide(conn, Acquire(CID, "w2", LEASE_MS), now)


def test_start_after_stop_keeps_checkpoint() -> None:
    conn = checkpointed(seq=41, worker="w1")
    token = conn.token
    conn = run(conn, Stop(CID), T0 + 1)[0]

    conn, events = run(conn, Start(CID, URL), T0 + 2)

    assert [type(e) for e in events] == [ConnectionRestarted]
    assert conn.desired_state is DesiredState.STARTED
    assert conn.stop_reason is None
    assert conn.checkpoint_seq == 41
    assert conn.token == token  # never reused: the next acquire still goes above it


def test_start_after_stop_leaves_a_still_held_lease_with_its_owner() -> None:
    """The owner may not have seen the STOP yet; nobody else may take the connection."""
    conn = run(leased("w1"), Stop(CID), T0 + 1)[0]

    conn = run(conn, Start(CID, URL), T0 + 2)[0]

    assert conn.is_held_by("w1", 1, T0 + 2)
    with pytest.raises(LeaseUnavailable, match="leased by 'w1'"):
        decide(conn, Acquire(CID, "w2", LEASE_MS), T0 + 3)


def test_start_after_stop_may_change_the_url() -> None:
    conn = run(started(url=URL), Stop(CID), T0)[0]

    conn = run(conn, Start(CID, OTHER_URL), T0 + 1)[0]

    assert conn.ws_url == OTHER_URL


def test_start_after_stop_clears_the_upstream_back_off() -> None:
    """An operator who restarts a connection asks for a fresh attempt, not more waiting."""
    conn = leased("w1")
    conn = run(
        conn, ReportUpstreamFailure(CID, "w1", conn.token, 0, T0 + 60_000, "refused"), T0 + 1
    )[0]
    conn = run(conn, Stop(CID), T0 + 2)[0]

    conn = run(conn, Start(CID, URL), T0 + 3)[0]

    assert conn.failures == 0
    assert conn.not_before_ms == 0
    assert run(conn, Acquire(CID, "w2", LEASE_MS), T0 + 4)[0].owner == "w2"
