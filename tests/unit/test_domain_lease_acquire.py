"""Acquire and takeover: who may take a connection's lease, and when."""

import pytest

from domain import (
    Acquire,
    ConnectionNotFound,
    InvalidCommand,
    LeaseAcquired,
    LeaseStatus,
    LeaseTakenOver,
    LeaseUnavailable,
    Release,
    Start,
    Stop,
    decide,
)
from tests.unit.domain_given import CID, LEASE_MS, T0, URL, leased, run, started


def test_acquire_of_never_leased_connection_grants_token_one() -> None:
    conn, events = run(started(), Acquire(CID, "w1", LEASE_MS), T0 + 5)

    assert events == [
        LeaseAcquired(
            connection_id=CID,
            version=2,
            at_ms=T0 + 5,
            owner="w1",
            token=1,
            expires_at_ms=T0 + 5 + LEASE_MS,
        )
    ]
    assert conn.is_held_by("w1", 1, T0 + 5)


def test_acquire_of_held_lease_is_refused_naming_the_owner() -> None:
    conn = leased("w1")

    with pytest.raises(LeaseUnavailable, match=f"{CID!r} is leased by 'w1' for another 4000 ms"):
        decide(conn, Acquire(CID, "w2", LEASE_MS), T0 + LEASE_MS - 4000)


def test_owner_cannot_acquire_its_own_held_lease_again() -> None:
    """A second acquire would hand out a second token for one holder; renew instead."""
    with pytest.raises(LeaseUnavailable):
        decide(leased("w1"), Acquire(CID, "w1", LEASE_MS), T0 + 1)


def test_lease_expires_strictly_after_expires_at() -> None:
    conn = leased("w1")
    expires_at = conn.expires_at_ms

    assert conn.lease_status(expires_at) is LeaseStatus.HELD
    assert conn.is_held_by("w1", conn.token, expires_at)
    with pytest.raises(LeaseUnavailable):
        decide(conn, Acquire(CID, "w2", LEASE_MS), expires_at)

    assert conn.lease_status(expires_at + 1) is LeaseStatus.EXPIRED
    assert not conn.is_held_by("w1", conn.token, expires_at + 1)
    assert run(conn, Acquire(CID, "w2", LEASE_MS), expires_at + 1)[0].owner == "w2"


def test_acquire_of_expired_lease_is_a_takeover_naming_the_previous_owner() -> None:
    conn = leased("w1")
    now = conn.expires_at_ms + 1

    conn2, events = run(conn, Acquire(CID, "w2", LEASE_MS), now)

    assert events == [
        LeaseTakenOver(
            connection_id=CID,
            version=conn.version + 1,
            at_ms=now,
            owner="w2",
            token=2,
            expires_at_ms=now + LEASE_MS,
            previous_owner="w1",
            previous_token=1,
            previous_expires_at_ms=conn.expires_at_ms,
        )
    ]
    assert conn2.is_held_by("w2", 2, now)


def test_acquire_after_release_is_a_plain_acquire_not_a_takeover() -> None:
    conn = leased("w1")
    conn = run(conn, Release(CID, "w1", conn.token, 0), T0 + 1)[0]

    _, events = run(conn, Acquire(CID, "w2", LEASE_MS), T0 + 2)

    assert [type(e) for e in events] == [LeaseAcquired]


def test_every_acquire_increases_the_fencing_token() -> None:
    """Fresh acquire, takeover, acquire after release, acquire after a restart: 1, 2, 3, 4."""
    tokens = []
    conn = run(started(), Acquire(CID, "w1", LEASE_MS), T0)[0]
    tokens.append(conn.token)
    now = conn.expires_at_ms + 1
    conn = run(conn, Acquire(CID, "w2", LEASE_MS), now)[0]
    tokens.append(conn.token)
    conn = run(conn, Release(CID, "w2", conn.token, 0), now + 1)[0]
    conn = run(conn, Acquire(CID, "w1", LEASE_MS), now + 2)[0]
    tokens.append(conn.token)
    conn = run(conn, Release(CID, "w1", conn.token, 0), now + 3)[0]
    conn = run(run(conn, Stop(CID), now + 4)[0], Start(CID, URL), now + 5)[0]
    conn = run(conn, Acquire(CID, "w3", LEASE_MS), now + 6)[0]
    tokens.append(conn.token)

    assert tokens == [1, 2, 3, 4]


def test_acquire_of_unknown_connection_is_refused() -> None:
    with pytest.raises(ConnectionNotFound, match=CID):
        decide(None, Acquire(CID, "w1", LEASE_MS), T0)


@pytest.mark.parametrize("lease_ms", [0, -1])
def test_acquire_with_a_non_positive_lease_is_refused(lease_ms: int) -> None:
    with pytest.raises(InvalidCommand, match=f"lease_ms must be positive, got {lease_ms}"):
        decide(started(), Acquire(CID, "w1", lease_ms), T0)


@pytest.mark.parametrize("worker_id", ["", "w" * 257])
def test_acquire_with_an_invalid_worker_id_is_refused(worker_id: str) -> None:
    with pytest.raises(InvalidCommand, match="worker id"):
        decide(started(), Acquire(CID, worker_id, LEASE_MS), T0)
