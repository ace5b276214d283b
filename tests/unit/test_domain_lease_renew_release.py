"""Renew and release: only the current owner with the current token, and never shortening."""

import pytest

from domain import (
    Acquire,
    ConnectionNotFound,
    InvalidCommand,
    LeaseLost,
    LeaseReleased,
    LeaseRenewed,
    LeaseStatus,
    Release,
    Renew,
    decide,
)
from tests.unit.domain_given import CID, LEASE_MS, T0, leased, run


def test_renew_extends_the_lease_from_now() -> None:
    conn = leased("w1")

    conn, events = run(conn, Renew(CID, "w1", conn.token, LEASE_MS, 0), T0 + 4000)

    assert [type(e) for e in events] == [LeaseRenewed]
    assert conn.expires_at_ms == T0 + 4000 + LEASE_MS
    assert conn.is_held_by("w1", 1, T0 + 4000 + LEASE_MS)


def test_renew_never_shortens_a_lease() -> None:
    conn = leased("w1", lease_ms=LEASE_MS)

    conn = run(conn, Renew(CID, "w1", conn.token, 1, 0), T0 + 10)[0]

    assert conn.expires_at_ms == T0 + LEASE_MS


def test_renew_at_the_last_held_instant_succeeds_and_one_later_is_refused() -> None:
    conn = leased("w1")
    at_expiry = conn.expires_at_ms

    assert run(conn, Renew(CID, "w1", 1, LEASE_MS, 0), at_expiry)[0].expires_at_ms > at_expiry
    with pytest.raises(LeaseLost, match=f"lease on {CID!r} expired 1 ms ago"):
        decide(conn, Renew(CID, "w1", 1, LEASE_MS, 0), at_expiry + 1)


def test_old_owner_cannot_renew_or_release_after_takeover() -> None:
    conn = leased("w1")
    now = conn.expires_at_ms + 1
    conn = run(conn, Acquire(CID, "w2", LEASE_MS), now)[0]

    with pytest.raises(
        LeaseLost, match=f"lease on {CID!r} was taken over by 'w2' .token 2, yours 1"
    ):
        decide(conn, Renew(CID, "w1", 1, LEASE_MS, 0), now + 1)
    with pytest.raises(LeaseLost, match="taken over by 'w2'"):
        decide(conn, Release(CID, "w1", 1, 0), now + 1)


def test_renew_with_a_stale_token_of_the_same_worker_is_refused() -> None:
    """w1 lost the lease and won it back: its old session's token must not work any more."""
    conn = leased("w1")
    now = conn.expires_at_ms + 1
    conn = run(conn, Acquire(CID, "w1", LEASE_MS), now)[0]

    with pytest.raises(LeaseLost, match=f"'w1' no longer holds token 1 on {CID!r}"):
        decide(conn, Renew(CID, "w1", 1, LEASE_MS, 0), now + 1)


def test_renew_by_another_worker_presenting_the_owners_token_is_refused() -> None:
    conn = leased("w1")

    with pytest.raises(LeaseLost, match="'w2'"):
        decide(conn, Renew(CID, "w2", conn.token, LEASE_MS, 0), T0 + 1)


def test_renew_of_unknown_connection_is_refused() -> None:
    with pytest.raises(ConnectionNotFound, match=CID):
        decide(None, Renew(CID, "w1", 1, LEASE_MS, 0), T0)


def test_renew_with_a_non_positive_lease_is_refused() -> None:
    with pytest.raises(InvalidCommand, match="lease_ms"):
        decide(leased("w1"), Renew(CID, "w1", 1, 0, 0), T0 + 1)


def test_release_frees_the_connection_at_once_keeping_the_token() -> None:
    conn = leased("w1")

    conn, events = run(conn, Release(CID, "w1", 1, 0), T0 + 1)

    assert events == [
        LeaseReleased(connection_id=CID, version=conn.version, at_ms=T0 + 1, owner="w1", token=1)
    ]
    assert conn.lease_status(T0 + 1) is LeaseStatus.RELEASED
    assert conn.token == 1
    assert conn.is_orphan(T0 + 2)


def test_owner_may_release_its_expired_lease_while_nobody_took_over() -> None:
    conn = leased("w1")

    conn = run(conn, Release(CID, "w1", 1, 0), conn.expires_at_ms + 500)[0]

    assert conn.lease_status(T0 + LEASE_MS + 501) is LeaseStatus.RELEASED


def test_second_release_of_the_same_lease_is_refused() -> None:
    conn = run(leased("w1"), Release(CID, "w1", 1, 0), T0 + 1)[0]

    with pytest.raises(LeaseLost, match=f"'w1' no longer holds token 1 on {CID!r}"):
        decide(conn, Release(CID, "w1", 1, 0), T0 + 2)
