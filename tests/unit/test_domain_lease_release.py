"""Release and the other owner-only commands: only the owner session with the current token,
still allowed after that session died as long as nobody took over."""

import pytest

from domain import (
    Acquire,
    Checkpoint,
    ConnectionNotFound,
    EndStream,
    LeaseLost,
    LeaseReleased,
    LeaseStatus,
    Release,
    ReportUpstreamFailure,
    SessionLookup,
    decide,
)
from tests.unit.domain_given import (
    CID,
    EXPIRY,
    LIVE,
    T0,
    ended,
    leased,
    live_at,
    opened,
    run,
    sessions,
)

OwnerCommand = Checkpoint | Release | EndStream | ReportUpstreamFailure


def _by(session_id: str, token: int) -> list[OwnerCommand]:
    return [
        Checkpoint(CID, session_id, token, 3),
        Release(CID, session_id, token, 3),
        EndStream(CID, session_id, token, 3),
        ReportUpstreamFailure(CID, session_id, token, 3, T0 + 60_000, "503"),
    ]


def test_release_frees_the_connection_at_once_keeping_the_token() -> None:
    conn = leased("s1")

    conn, events = run(conn, Release(CID, "s1", 1, 0), T0 + 1)

    assert events == [
        LeaseReleased(connection_id=CID, version=conn.version, at_ms=T0 + 1, owner="s1", token=1)
    ]
    assert conn.lease_status(T0 + 1, LIVE) is LeaseStatus.RELEASED
    assert conn.token == 1
    assert conn.is_orphan(T0 + 2, LIVE)  # while the releasing session is still live


DEAD_OWNER: dict[str, tuple[SessionLookup, int]] = {
    "expired": (sessions(opened("s1")), EXPIRY + 500),
    "ended": (sessions(ended(opened("s1"), T0 + 1)), T0 + 2),
    "missing": ({}, T0 + 2),
}


@pytest.mark.parametrize("kind", sorted(DEAD_OWNER))
@pytest.mark.parametrize("command", _by("s1", 1), ids=lambda c: type(c).__name__)
def test_the_owner_may_still_release_or_checkpoint_after_its_session_died_if_nobody_took_over(
    kind: str, command: OwnerCommand
) -> None:
    """A worker that lost its session fences, then hands back what it holds: a release frees
    the connection sooner, and what it stored is stored."""
    fleet, now = DEAD_OWNER[kind]
    conn = leased("s1")
    assert conn.lease_status(now, fleet) is LeaseStatus.EXPIRED

    after, events = run(conn, command, now, fleet)

    assert events
    assert after.checkpoint_seq == 3
    if not isinstance(command, Checkpoint):
        assert after.lease_status(now, fleet) is LeaseStatus.RELEASED


@pytest.mark.parametrize("command", _by("s1", 1), ids=lambda c: type(c).__name__)
def test_the_old_owner_can_do_nothing_after_a_takeover(command: OwnerCommand) -> None:
    now = EXPIRY + 1
    fleet = live_at(now, "s2")
    conn = run(leased("s1"), Acquire(CID, "s2"), now, fleet)[0]

    with pytest.raises(
        LeaseLost, match=rf"^lease on '{CID}' was taken over by 's2' \(token 2, yours 1\)$"
    ):
        decide(conn, command, now + 1, fleet)


@pytest.mark.parametrize("command", _by("s1", 1), ids=lambda c: type(c).__name__)
def test_a_stale_token_of_the_same_session_is_refused(command: OwnerCommand) -> None:
    """s1 released and won the connection back: its first lease's token must not work."""
    conn = run(leased("s1"), Release(CID, "s1", 1, 0), T0 + 1)[0]
    conn = run(conn, Acquire(CID, "s1"), T0 + 2)[0]

    with pytest.raises(LeaseLost, match=rf"^'s1' no longer holds token 1 on '{CID}'$"):
        decide(conn, command, T0 + 3, LIVE)


@pytest.mark.parametrize("command", _by("s2", 1), ids=lambda c: type(c).__name__)
def test_another_session_presenting_the_owners_token_is_refused(command: OwnerCommand) -> None:
    with pytest.raises(LeaseLost, match="'s2'"):
        decide(leased("s1"), command, T0 + 1, LIVE)


@pytest.mark.parametrize("command", _by("s1", 1), ids=lambda c: type(c).__name__)
def test_owner_commands_on_an_unknown_connection_are_refused(command: OwnerCommand) -> None:
    with pytest.raises(ConnectionNotFound, match=CID):
        decide(None, command, T0, LIVE)


def test_second_release_of_the_same_lease_is_refused() -> None:
    conn = run(leased("s1"), Release(CID, "s1", 1, 0), T0 + 1)[0]

    with pytest.raises(LeaseLost, match=rf"^'s1' no longer holds token 1 on '{CID}'$"):
        decide(conn, Release(CID, "s1", 1, 0), T0 + 2, LIVE)


def test_every_hand_back_logs_where_the_stream_stood_and_why() -> None:
    from domain import EndStream, LeaseReleased, Release, ReportUpstreamFailure, decide

    for command, reason in (
        (Release(CID, "s1", 1, 7, "shutdown"), "shutdown"),
        (EndStream(CID, "s1", 1, 7), "stream ended"),
        (ReportUpstreamFailure(CID, "s1", 1, 7, T0 + 60_000, "503"), "upstream failed"),
    ):
        released = decide(leased("s1"), command, T0 + 1)[-1]
        assert isinstance(released, LeaseReleased)
        assert (released.checkpoint_seq, released.reason) == (7, reason)
