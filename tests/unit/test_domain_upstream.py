"""Upstream outcomes: a normal end stops the connection; repeated failures back off the fleet."""

import pytest

from domain import (
    Acquire,
    Checkpoint,
    Checkpointed,
    DesiredState,
    EndStream,
    LeaseLost,
    LeaseReleased,
    LeaseStatus,
    LeaseUnavailable,
    ReportUpstreamFailure,
    Stop,
    StopReason,
    StreamEnded,
    UpstreamFailed,
    decide,
)
from domain.state import Connection
from tests.unit.domain_given import CID, EXPIRY, LIVE, T0, leased, live_at, run

BACK_OFF_MS = 30_000


def _failed(conn: Connection, now_ms: int, seq: int = 0, healthy: bool = False) -> Connection:
    until = now_ms + BACK_OFF_MS
    command = ReportUpstreamFailure(CID, conn.owner, conn.token, seq, until, "503", healthy)
    return run(conn, command, now_ms, {})[0]  # the owner's session plays no part


def _taken_by_s2(conn: Connection, now_ms: int) -> Connection:
    return run(conn, Acquire(CID, "s2"), now_ms, live_at(now_ms, "s2"))[0]


def test_upstream_failure_releases_with_a_not_before_time() -> None:
    conn, events = run(
        leased("s1"), ReportUpstreamFailure(CID, "s1", 1, 0, T0 + BACK_OFF_MS, "refused"), T0 + 1
    )

    assert [type(e) for e in events] == [UpstreamFailed, LeaseReleased]
    assert conn.lease_status(T0 + 1, LIVE) is LeaseStatus.RELEASED
    assert (conn.failures, conn.not_before_ms) == (1, T0 + BACK_OFF_MS)


def test_upstream_failure_blocks_acquire_until_not_before() -> None:
    conn = _failed(leased("s1"), T0)
    not_before = conn.not_before_ms

    for now in (T0 + 1, not_before):
        fleet = live_at(now, "s2")
        with pytest.raises(LeaseUnavailable, match=f"{CID!r} is backing off after 1 upstream"):
            decide(conn, Acquire(CID, "s2"), now, fleet)
        assert not conn.is_orphan(now, fleet)

    assert conn.is_orphan(not_before + 1, {})
    assert _taken_by_s2(conn, not_before + 1).owner == "s2"


def test_failures_without_progress_accumulate_across_owners() -> None:
    conn = _failed(leased("s1"), T0)
    now = conn.not_before_ms + 1
    conn = _taken_by_s2(conn, now)

    conn = _failed(conn, now)

    assert conn.failures == 2


def test_progress_clears_failure_count() -> None:
    conn = _failed(leased("s1"), T0)
    now = conn.not_before_ms + 1
    conn = _taken_by_s2(conn, now)

    conn, events = run(conn, Checkpoint(CID, "s2", conn.token, 5), now + 1)

    assert Checkpointed in [type(e) for e in events]
    assert conn.failures == 0


def test_failure_after_progress_of_a_healthy_lease_counts_as_the_first() -> None:
    conn = _failed(leased("s1"), T0)
    now = conn.not_before_ms + 1
    conn = _taken_by_s2(conn, now)

    conn = _failed(conn, now + 1, seq=5, healthy=True)

    assert (conn.failures, conn.checkpoint_seq) == (1, 5)


def test_progress_of_a_lease_that_did_not_stream_well_still_counts_one_more_failure() -> None:
    """A poison that sends one good message on every connect: its checkpoint moves, but
    the back-off must still grow."""
    conn = _failed(leased("s1"), T0)
    now = conn.not_before_ms + 1
    conn = _taken_by_s2(conn, now)

    conn = _failed(conn, now + 1, seq=1)

    assert (conn.failures, conn.checkpoint_seq) == (2, 1)


def test_failure_reason_is_truncated_to_keep_stored_items_small() -> None:
    command = ReportUpstreamFailure(CID, "s1", 1, 0, T0 + 1, "x" * 10_000)

    events = decide(leased("s1"), command, T0 + 1)

    assert [len(e.reason) for e in events if isinstance(e, UpstreamFailed)] == [500]


def test_end_stream_stops_the_connection_and_releases() -> None:
    conn, events = run(leased("s1"), EndStream(CID, "s1", 1, 9), T0 + 1)

    assert [type(e) for e in events] == [Checkpointed, StreamEnded, LeaseReleased]
    assert conn.desired_state is DesiredState.STOPPED
    assert conn.stop_reason is StopReason.STREAM_ENDED
    assert conn.lease_status(T0 + 1, LIVE) is LeaseStatus.RELEASED
    assert conn.checkpoint_seq == 9
    assert not conn.is_orphan(T0 + 2, LIVE)


def test_end_stream_of_an_already_stopped_connection_only_releases() -> None:
    conn = run(leased("s1"), Stop(CID), T0 + 1)[0]

    conn, events = run(conn, EndStream(CID, "s1", 1, 0), T0 + 2)

    assert [type(e) for e in events] == [LeaseReleased]
    assert conn.stop_reason is StopReason.REQUESTED


@pytest.mark.parametrize(
    "command",
    [
        EndStream(CID, "s1", 1, 0),
        ReportUpstreamFailure(CID, "s1", 1, 0, T0 + BACK_OFF_MS, "refused"),
    ],
    ids=lambda command: type(command).__name__,
)
def test_old_owner_cannot_end_or_fail_the_stream_after_takeover(
    command: EndStream | ReportUpstreamFailure,
) -> None:
    conn = _taken_by_s2(leased("s1"), EXPIRY + 1)

    with pytest.raises(LeaseLost, match="taken over by 's2'"):
        decide(conn, command, EXPIRY + 2, {})
