"""Checkpoints: the highest durably stored seq rides on renew and release, and never regresses."""

import pytest

from domain import (
    Acquire,
    Checkpointed,
    CheckpointRegressed,
    EndStream,
    LeaseReleased,
    LeaseRenewed,
    Release,
    Renew,
    ReportUpstreamFailure,
    decide,
)
from tests.unit.domain_given import CID, LEASE_MS, T0, checkpointed, leased, run


def test_renew_records_the_checkpoint_in_the_same_decision() -> None:
    conn = leased("w1")

    conn, events = run(conn, Renew(CID, "w1", 1, LEASE_MS, 17), T0 + 1)

    assert [type(e) for e in events] == [LeaseRenewed, Checkpointed]
    assert conn.checkpoint_seq == 17
    assert conn.resume_from_seq == 18


def test_renew_without_progress_records_no_checkpoint_event() -> None:
    conn = checkpointed(seq=17)

    _, events = run(conn, Renew(CID, "w1", 1, LEASE_MS, 17), T0 + 1)

    assert [type(e) for e in events] == [LeaseRenewed]


def test_release_records_the_final_checkpoint_before_releasing() -> None:
    conn = checkpointed(seq=17)

    conn, events = run(conn, Release(CID, "w1", 1, 25), T0 + 1)

    assert [type(e) for e in events] == [Checkpointed, LeaseReleased]
    assert conn.checkpoint_seq == 25


@pytest.mark.parametrize(
    "command",
    [
        Renew(CID, "w1", 1, LEASE_MS, 16),
        Release(CID, "w1", 1, 16),
        EndStream(CID, "w1", 1, 16),
        ReportUpstreamFailure(CID, "w1", 1, 16, T0 + 5000, "refused"),
    ],
    ids=lambda command: type(command).__name__,
)
def test_checkpoint_never_goes_backwards(
    command: Renew | Release | EndStream | ReportUpstreamFailure,
) -> None:
    conn = checkpointed(seq=17)

    with pytest.raises(CheckpointRegressed, match=f"checkpoint 16 of {CID!r} is behind .* 17"):
        decide(conn, command, T0 + 1)


def test_new_owner_resumes_after_the_previous_owners_checkpoint() -> None:
    conn = checkpointed(seq=17, worker="w1")

    conn = run(conn, Acquire(CID, "w2", LEASE_MS), conn.expires_at_ms + 1)[0]

    assert conn.owner == "w2"
    assert conn.resume_from_seq == 18
