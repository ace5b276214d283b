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
    EndStream,
    InvalidCommand,
    LeaseStatus,
    LeaseUnavailable,
    Release,
    ReportUpstreamFailure,
    Start,
    Stop,
    StopReason,
    StopRequested,
    decide,
)
from tests.unit.domain_given import (
    CID,
    EXPIRY,
    LIVE,
    OTHER_URL,
    T0,
    URL,
    checkpointed,
    leased,
    live_at,
    run,
    started,
)


def test_start_of_new_connection_is_started_and_never_leased() -> None:
    conn, events = run(None, Start(CID, URL), T0)

    assert events == [ConnectionStarted(connection_id=CID, version=1, at_ms=T0, ws_url=URL)]
    assert conn.desired_state is DesiredState.STARTED
    assert conn.ws_url == URL
    assert conn.lease_status(T0, LIVE) is LeaseStatus.NEVER_LEASED
    assert conn.is_orphan(T0 + 1, LIVE)
    assert not conn.stop_pending


def test_retried_start_keeps_lease_token_and_checkpoint() -> None:
    """The article's put_item overwrote these: a retried START caused a double claim."""
    conn = checkpointed(seq=41, owner="s1")

    assert decide(conn, Start(CID, URL), T0 + 5, LIVE) == []
    assert conn.is_held_by("s1", conn.token, T0 + 5, LIVE)
    assert conn.checkpoint_seq == 41


def test_start_with_other_url_while_started_is_a_conflict() -> None:
    conn = leased("s1")

    with pytest.raises(ConnectionConflict, match=f"{CID!r}.*stop it first"):
        decide(conn, Start(CID, OTHER_URL), T0 + 1, LIVE)


def test_start_with_a_non_websocket_url_is_refused() -> None:
    with pytest.raises(InvalidCommand, match="ws:// or wss://"):
        decide(None, Start(CID, "https://feeds.example.com/a"), T0)


def test_stop_of_unknown_connection_is_refused() -> None:
    """The article's update_item silently created a half-formed item instead."""
    with pytest.raises(ConnectionNotFound, match=f"{CID!r} was never started"):
        decide(None, Stop(CID), T0)


def test_stop_marks_the_connection_stopped_and_leaves_the_lease_to_its_owner() -> None:
    conn, events = run(leased("s1"), Stop(CID), T0 + 1)

    assert [type(e) for e in events] == [StopRequested]
    assert conn.desired_state is DesiredState.STOPPED
    assert conn.stop_reason is StopReason.REQUESTED
    assert conn.is_held_by("s1", conn.token, T0 + 1, LIVE)  # the owner sees STOP and releases
    assert conn.stop_pending
    assert not conn.is_orphan(EXPIRY + 1, {})  # not wanted: not an orphan, even unowned


def test_a_stop_is_pending_exactly_while_a_stopped_connection_still_has_an_owner() -> None:
    """What the stops-by-owner index holds: an owner learns of its STOPs in one read."""
    held = leased("s1")
    stopped = run(held, Stop(CID), T0 + 1)[0]
    released = run(stopped, Release(CID, "s1", 1, 0), T0 + 2)[0]
    ended = run(held, EndStream(CID, "s1", 1, 0), T0 + 1)[0]

    assert not held.stop_pending  # wanted
    assert stopped.stop_pending
    assert not released.stop_pending  # honoured
    assert not ended.stop_pending  # the stream ended: STOPPED and released in one step
    assert not run(started(), Stop(CID), T0)[0].stop_pending  # nobody to tell


def test_repeated_stop_changes_nothing() -> None:
    conn = run(started(), Stop(CID), T0)[0]

    assert decide(conn, Stop(CID), T0 + 1) == []


def test_stopped_connection_is_never_acquired() -> None:
    conn = run(started(), Stop(CID), T0)[0]

    for now in (T0, T0 + 1, EXPIRY + 10_000):
        with pytest.raises(ConnectionStopped, match=f"{CID!r} is stopped"):
            decide(conn, Acquire(CID, "s2"), now, live_at(now, "s2"))


def test_start_after_stop_keeps_checkpoint() -> None:
    conn = checkpointed(seq=41, owner="s1")
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
    conn = run(leased("s1"), Stop(CID), T0 + 1)[0]

    conn = run(conn, Start(CID, URL), T0 + 2)[0]

    assert conn.is_held_by("s1", 1, T0 + 2, LIVE)
    assert not conn.stop_pending
    with pytest.raises(LeaseUnavailable, match="leased by live session 's1'"):
        decide(conn, Acquire(CID, "s2"), T0 + 3, LIVE)


def test_start_after_stop_may_change_the_url() -> None:
    conn = run(started(url=URL), Stop(CID), T0)[0]

    conn = run(conn, Start(CID, OTHER_URL), T0 + 1)[0]

    assert conn.ws_url == OTHER_URL


def test_start_after_stop_clears_the_upstream_back_off() -> None:
    """An operator who restarts a connection asks for a fresh attempt, not more waiting."""
    conn = leased("s1")
    conn = run(
        conn, ReportUpstreamFailure(CID, "s1", conn.token, 0, T0 + 60_000, "refused"), T0 + 1
    )[0]
    conn = run(conn, Stop(CID), T0 + 2)[0]

    conn = run(conn, Start(CID, URL), T0 + 3)[0]

    assert conn.failures == 0
    assert conn.not_before_ms == 0
    assert run(conn, Acquire(CID, "s2"), T0 + 4)[0].owner == "s2"
