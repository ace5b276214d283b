"""Checkpoints: the highest durably stored seq, recorded by the owner (a rare Checkpoint, and
the final one on release), never regressing, and where a new owner resumes."""

import pytest

from domain import (
    Acquire,
    Checkpoint,
    Checkpointed,
    CheckpointRegressed,
    EndStream,
    LeaseReleased,
    Release,
    ReportUpstreamFailure,
    decide,
    is_ownership_event,
)
from tests.unit.domain_given import CID, EXPIRY, LIVE, T0, checkpointed, leased, live_at, run


def test_a_checkpoint_is_recorded_and_is_where_a_new_owner_resumes() -> None:
    before = leased("s1")

    conn, events = run(before, Checkpoint(CID, "s1", 1, 17), T0 + 1)

    assert events == [Checkpointed(connection_id=CID, version=3, at_ms=T0 + 1, seq=17)]
    assert (conn.checkpoint_seq, conn.resume_from_seq) == (17, 18)
    assert (conn.owner, conn.token) == (before.owner, before.token)  # ownership untouched


def test_a_checkpoint_is_not_written_to_the_ownership_log() -> None:
    """Checkpoints move only the current state, as heartbeats do: the log stays small."""
    _, events = run(leased("s1"), Checkpoint(CID, "s1", 1, 17), T0 + 1)

    assert not any(is_ownership_event(e) for e in events)


def test_a_checkpoint_without_progress_records_nothing() -> None:
    conn = checkpointed(seq=17)

    assert decide(conn, Checkpoint(CID, "s1", 1, 17), T0 + 1, LIVE) == []


def test_release_records_the_final_checkpoint_before_releasing() -> None:
    conn = checkpointed(seq=17)

    conn, events = run(conn, Release(CID, "s1", 1, 25), T0 + 1)

    assert [type(e) for e in events] == [Checkpointed, LeaseReleased]
    assert conn.checkpoint_seq == 25


@pytest.mark.parametrize(
    "command",
    [
        Checkpoint(CID, "s1", 1, 16),
        Release(CID, "s1", 1, 16),
        EndStream(CID, "s1", 1, 16),
        ReportUpstreamFailure(CID, "s1", 1, 16, T0 + 5000, "refused"),
    ],
    ids=lambda command: type(command).__name__,
)
def test_checkpoint_never_goes_backwards(
    command: Checkpoint | Release | EndStream | ReportUpstreamFailure,
) -> None:
    conn = checkpointed(seq=17)

    with pytest.raises(CheckpointRegressed, match=f"checkpoint 16 of {CID!r} is behind .* 17"):
        decide(conn, command, T0 + 1, LIVE)


def test_new_owner_resumes_after_the_previous_owners_checkpoint() -> None:
    conn = checkpointed(seq=17, owner="s1")
    now = EXPIRY + 1

    conn = run(conn, Acquire(CID, "s2"), now, live_at(now, "s2"))[0]

    assert conn.owner == "s2"
    assert conn.resume_from_seq == 18
