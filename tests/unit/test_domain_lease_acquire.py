"""Acquire and takeover: which live worker session may take a connection, and when.

A lease is held while its owner's session is live; it may be taken when there is no owner or
the owner's session is expired, ended or gone, and only by a live session."""

import pytest

from domain import (
    Acquire,
    ConnectionNotFound,
    ConnectionStopped,
    InvalidCommand,
    LeaseAcquired,
    LeaseStatus,
    LeaseTakenOver,
    LeaseUnavailable,
    Release,
    ReportUpstreamFailure,
    SessionLookup,
    SessionNotLive,
    Start,
    Stop,
    WorkerSession,
    decide,
)
from tests.unit.domain_given import (
    CID,
    EXPIRY,
    LIVE,
    T0,
    URL,
    ended,
    leased,
    live_at,
    opened,
    renewed,
    run,
    sessions,
    started,
)


def test_acquire_of_never_leased_connection_grants_token_one() -> None:
    conn, events = run(started(), Acquire(CID, "s1"), T0 + 5)

    assert events == [
        LeaseAcquired(
            connection_id=CID, version=2, at_ms=T0 + 5, owner="s1", token=1, free_since_ms=T0
        )
    ]
    assert conn.is_held_by("s1", 1, T0 + 5, LIVE)
    assert conn.lease_status(T0 + 5, LIVE) is LeaseStatus.HELD


def test_acquire_of_a_lease_held_by_a_live_session_is_refused_naming_it() -> None:
    with pytest.raises(
        LeaseUnavailable, match=rf"^connection '{CID}' is leased by live session 's1'$"
    ):
        decide(leased("s1"), Acquire(CID, "s2"), EXPIRY, LIVE)


def test_owner_cannot_acquire_its_own_held_lease_again() -> None:
    """A second acquire would hand out a second token for one holder."""
    with pytest.raises(LeaseUnavailable):
        decide(leased("s1"), Acquire(CID, "s1"), T0 + 1, LIVE)


def _dead(kind: str) -> SessionLookup:
    """s1 dead (expired, ended or forgotten) and s2 live, one ms after s1's expiry or earlier."""
    s2 = renewed(opened("s2"), EXPIRY)  # live well past s1's expiry
    if kind == "expired":
        return sessions(opened("s1"), s2)
    if kind == "ended":
        return sessions(ended(opened("s1"), T0 + 1), s2)
    return sessions(s2)  # "missing": the item was never written or was cleaned up


NOW_DEAD = {"expired": EXPIRY + 1, "ended": T0 + 2, "missing": T0 + 2}


@pytest.mark.parametrize("kind", sorted(NOW_DEAD))
def test_a_connection_whose_owner_session_died_is_taken_over_naming_the_previous_owner(
    kind: str,
) -> None:
    conn, now, fleet = leased("s1"), NOW_DEAD[kind], _dead(kind)
    assert conn.lease_status(now, fleet) is LeaseStatus.EXPIRED
    assert conn.is_orphan(now, fleet)

    taken, events = run(conn, Acquire(CID, "s2"), now, fleet)

    assert events == [
        LeaseTakenOver(
            connection_id=CID,
            version=conn.version + 1,
            at_ms=now,
            owner="s2",
            token=2,
            previous_owner="s1",
            previous_token=1,
        )
    ]
    assert taken.is_held_by("s2", 2, now, fleet)
    assert not taken.is_held_by("s1", 1, now, fleet)


def test_lease_is_held_until_the_owners_session_expires_inclusive() -> None:
    conn = leased("s1")
    fleet = _dead("expired")

    assert conn.lease_status(EXPIRY, fleet) is LeaseStatus.HELD
    assert conn.is_held_by("s1", conn.token, EXPIRY, fleet)
    assert not conn.is_orphan(EXPIRY, fleet)
    with pytest.raises(LeaseUnavailable):
        decide(conn, Acquire(CID, "s2"), EXPIRY, fleet)

    assert conn.lease_status(EXPIRY + 1, fleet) is LeaseStatus.EXPIRED
    assert run(conn, Acquire(CID, "s2"), EXPIRY + 1, fleet)[0].owner == "s2"


def test_a_renewed_owner_session_keeps_its_connections_past_the_first_expiry() -> None:
    """One heartbeat per worker holds every connection it owns: no per-connection renew."""
    conn = leased("s1")
    fleet = sessions(renewed(opened("s1"), EXPIRY), renewed(opened("s2"), EXPIRY))

    assert conn.is_held_by("s1", 1, EXPIRY + 5_000, fleet)
    with pytest.raises(LeaseUnavailable):
        decide(conn, Acquire(CID, "s2"), EXPIRY + 5_000, fleet)


@pytest.mark.parametrize(
    "acquirer",
    [
        opened("s2", T0 - 20_000),  # expired long ago
        ended(opened("s2"), T0),  # ended
        None,  # unknown
    ],
    ids=["expired", "ended", "unknown"],
)
def test_acquire_needs_the_acquirers_session_live(acquirer: WorkerSession | None) -> None:
    """A dead session must own nothing new, so a frozen worker takes nothing."""
    for conn in (started(), run(leased("s1"), Release(CID, "s1", 1, 0), T0 + 1)[0]):
        fleet = {} if acquirer is None else sessions(acquirer)
        with pytest.raises(SessionNotLive, match=r"^worker session 's2' is not live$"):
            decide(conn, Acquire(CID, "s2"), T0 + 2, fleet)


def test_without_any_sessions_no_acquire_is_granted() -> None:
    """decide's default: no sessions to consult, so nobody is live."""
    with pytest.raises(SessionNotLive):
        decide(started(), Acquire(CID, "s1"), T0)


def test_a_dead_acquirer_is_refused_before_anything_about_the_connection() -> None:
    """A stopped or held connection still answers "not live" to a dead session: the worker's
    remedy (fence everything, open a new session) is the same whatever it tried to take."""
    stopped = run(started(), Stop(CID), T0)[0]
    for conn in (stopped, leased("s1")):
        with pytest.raises(SessionNotLive):
            decide(conn, Acquire(CID, "s9"), T0 + 1, LIVE)


def test_a_live_session_cannot_take_a_stopped_connection() -> None:
    stopped = run(started(), Stop(CID), T0)[0]

    with pytest.raises(ConnectionStopped, match=rf"^connection '{CID}' is stopped$"):
        decide(stopped, Acquire(CID, "s2"), T0 + 1, LIVE)


def test_acquire_after_release_is_a_plain_acquire_not_a_takeover() -> None:
    conn = run(leased("s1"), Release(CID, "s1", 1, 0), T0 + 1)[0]

    _, events = run(conn, Acquire(CID, "s2"), T0 + 2)

    assert [type(e) for e in events] == [LeaseAcquired]


def test_an_acquire_says_since_when_the_connection_was_free_to_take() -> None:
    """What the acquiring side of a handoff measures: from the release, or from the end of
    an upstream back-off, whichever came last."""
    released = run(leased("s1"), Release(CID, "s1", 1, 0), T0 + 300)[0]
    resting = run(
        leased("s1"), ReportUpstreamFailure(CID, "s1", 1, 0, T0 + 5_000, "boom"), T0 + 300
    )[0]

    (after_release,) = run(released, Acquire(CID, "s2"), T0 + 420)[1]
    (after_rest,) = run(resting, Acquire(CID, "s2"), T0 + 5_001)[1]

    assert isinstance(after_release, LeaseAcquired)
    assert isinstance(after_rest, LeaseAcquired)
    assert (after_release.free_since_ms, after_rest.free_since_ms) == (T0 + 300, T0 + 5_000)


def test_every_change_of_owner_raises_the_fencing_token() -> None:
    """Fresh acquire, takeover, acquire after release, the same session again after its own
    release, and after a restart: 1, 2, 3, 4, 5."""
    tokens = []
    conn = leased("s1")
    tokens.append(conn.token)
    now = EXPIRY + 1
    fleet = live_at(now, "s2", "s3")  # s1 is gone
    conn = run(conn, Acquire(CID, "s2"), now, fleet)[0]
    tokens.append(conn.token)
    conn = run(conn, Release(CID, "s2", conn.token, 0), now + 1, fleet)[0]
    conn = run(conn, Acquire(CID, "s3"), now + 2, fleet)[0]
    tokens.append(conn.token)
    conn = run(conn, Release(CID, "s3", conn.token, 0), now + 3, fleet)[0]
    conn = run(conn, Acquire(CID, "s3"), now + 4, fleet)[0]
    tokens.append(conn.token)
    conn = run(conn, Release(CID, "s3", conn.token, 0), now + 5, fleet)[0]
    conn = run(run(conn, Stop(CID), now + 6, fleet)[0], Start(CID, URL), now + 7, fleet)[0]
    conn = run(conn, Acquire(CID, "s2"), now + 8, fleet)[0]
    tokens.append(conn.token)

    assert tokens == [1, 2, 3, 4, 5]


def test_a_worker_back_from_a_freeze_takes_its_old_connection_under_a_new_session_and_token() -> (
    None
):
    """Its old session s1 expired; it opens s1b. Its old (s1, 1) pair must never work again."""
    conn = leased("s1")
    now = EXPIRY + 1
    fleet = sessions(opened("s1"), opened("s1b", now))

    conn, events = run(conn, Acquire(CID, "s1b"), now, fleet)

    assert [type(e) for e in events] == [LeaseTakenOver]
    assert (conn.owner, conn.token) == ("s1b", 2)


def test_acquire_of_unknown_connection_is_refused() -> None:
    with pytest.raises(ConnectionNotFound, match=CID):
        decide(None, Acquire(CID, "s1"), T0, LIVE)


@pytest.mark.parametrize("session_id", ["", "s" * 257, "s1\n", "s1\x00"])
def test_acquire_with_an_invalid_session_id_is_refused(session_id: str) -> None:
    with pytest.raises(InvalidCommand, match="worker session id must be 1-256 printable"):
        decide(started(), Acquire(CID, session_id), T0, LIVE)
