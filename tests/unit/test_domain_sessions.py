"""The worker session: opened once under a new id, renewed on the heartbeat without ever being
shortened, dead for good once it expired or ended."""

import attrs
import pytest

from domain import (
    SESSION_LOG_EVENTS,
    EndSession,
    InvalidCommand,
    InvalidTransition,
    NoteExpiry,
    OpenSession,
    RenewSession,
    SessionCommand,
    SessionEnded,
    SessionEvent,
    SessionExpired,
    SessionNotLive,
    SessionOpened,
    SessionRenewed,
    SessionStatus,
    WorkerSession,
    decide_session,
    evolve_session,
    fold_session,
)
from tests.unit.domain_given import (
    CAPACITY,
    EXPIRY,
    SESSION_MS,
    T0,
    ended,
    opened,
    renewed,
    run_session,
)


def test_open_makes_a_live_session_until_now_plus_its_lease() -> None:
    session, events = run_session(None, OpenSession("s1", SESSION_MS, CAPACITY), T0)

    assert events == [
        SessionOpened(session_id="s1", version=1, at_ms=T0, expires_at_ms=EXPIRY, capacity=CAPACITY)
    ]
    assert (session.opened_at_ms, session.updated_at_ms) == (T0, T0)
    assert (session.held, session.capacity, session.ended_reason) == (0, CAPACITY, None)
    assert session.status(T0) is SessionStatus.LIVE


def test_a_session_is_live_at_its_expiry_and_expired_one_ms_later() -> None:
    session = opened("s1")

    assert session.is_live(EXPIRY)
    assert session.status(EXPIRY + 1) is SessionStatus.EXPIRED
    assert not session.is_live(EXPIRY + 1)


def test_a_session_id_is_never_opened_twice_even_after_it_ended() -> None:
    """A worker that comes back must not revive a session whose connections were taken."""
    for state in (opened("s1"), ended(opened("s1"))):
        with pytest.raises(InvalidCommand, match=r"^worker session id 's1' was used before$"):
            decide_session(state, OpenSession("s1", SESSION_MS, CAPACITY), EXPIRY + 5)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (OpenSession("s1", 0, CAPACITY), r"^lease_ms must be positive, got 0$"),
        (OpenSession("s1", SESSION_MS, -1), r"^capacity must not be negative, got -1$"),
        (OpenSession("", SESSION_MS, CAPACITY), "worker session id must be 1-256 printable"),
        (OpenSession("s\n1", SESSION_MS, CAPACITY), "printable"),
        (OpenSession("s" * 257, SESSION_MS, CAPACITY), "1-256"),
    ],
)
def test_a_malformed_open_is_refused_saying_why(command: OpenSession, message: str) -> None:
    with pytest.raises(InvalidCommand, match=message):
        decide_session(None, command, T0)


def test_renew_extends_from_now_and_reports_the_load() -> None:
    session = opened("s1")

    session, events = run_session(session, RenewSession("s1", SESSION_MS, 7, 50), T0 + 4_000)

    assert events == [
        SessionRenewed(
            session_id="s1",
            version=2,
            at_ms=T0 + 4_000,
            expires_at_ms=T0 + 4_000 + SESSION_MS,
            held=7,
            capacity=50,
        )
    ]
    assert (session.expires_at_ms, session.held, session.capacity) == (
        T0 + 4_000 + SESSION_MS,
        7,
        50,
    )
    assert session.updated_at_ms == T0 + 4_000
    assert session.opened_at_ms == T0


def test_renew_never_shortens_a_session() -> None:
    session = opened("s1")

    session = run_session(session, RenewSession("s1", 1, 3, CAPACITY), T0 + 10)[0]

    assert session.expires_at_ms == EXPIRY
    assert session.held == 3  # the load is still reported


def test_renew_at_the_last_live_instant_succeeds_and_one_later_is_refused() -> None:
    session = opened("s1")

    assert renewed(session, EXPIRY).expires_at_ms == EXPIRY + SESSION_MS
    with pytest.raises(SessionNotLive, match=r"^worker session 's1' is expired$"):
        decide_session(session, RenewSession("s1", SESSION_MS, 0, CAPACITY), EXPIRY + 1)


def test_renew_of_an_ended_session_is_refused_even_before_its_expiry() -> None:
    session = ended(opened("s1"), T0 + 1)

    with pytest.raises(SessionNotLive, match=r"^worker session 's1' is ended$"):
        decide_session(session, RenewSession("s1", SESSION_MS, 0, CAPACITY), T0 + 2)


def test_renew_of_an_unknown_session_is_refused() -> None:
    with pytest.raises(SessionNotLive, match=r"^worker session 's1' is unknown$"):
        decide_session(None, RenewSession("s1", SESSION_MS, 0, CAPACITY), T0)


def test_an_expired_session_stays_dead_however_late_the_renew() -> None:
    """A frozen worker's late heartbeat must not revive what a takeover saw dead."""
    session = opened("s1")
    for late in (EXPIRY + 1, EXPIRY + 1_000, EXPIRY + 10 * SESSION_MS):
        with pytest.raises(SessionNotLive):
            decide_session(session, RenewSession("s1", 10 * SESSION_MS, 0, CAPACITY), late)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (RenewSession("s1", 0, 0, CAPACITY), r"^lease_ms must be positive, got 0$"),
        (RenewSession("s1", SESSION_MS, -1, CAPACITY), r"^held must not be negative, got -1$"),
        (RenewSession("s1", SESSION_MS, 0, -1), r"^capacity must not be negative, got -1$"),
    ],
)
def test_a_malformed_renew_is_refused_and_changes_nothing(
    command: RenewSession, message: str
) -> None:
    with pytest.raises(InvalidCommand, match=message):
        decide_session(opened("s1"), command, T0 + 1)


def test_end_kills_the_session_at_once() -> None:
    session, events = run_session(opened("s1"), EndSession("s1", "shutdown"), T0 + 1)

    assert events == [SessionEnded(session_id="s1", version=2, at_ms=T0 + 1, reason="shutdown")]
    assert session.status(T0 + 1) is SessionStatus.ENDED
    assert session.ended_reason == "shutdown"
    assert session.expires_at_ms == EXPIRY  # ended wins over an expiry still ahead


def test_end_is_idempotent_and_the_first_reason_stands() -> None:
    session = ended(opened("s1"), T0 + 1, reason="shutdown")

    assert decide_session(session, EndSession("s1", "task STOPPED"), T0 + 2) == []
    assert session.ended_reason == "shutdown"


def test_an_expired_session_may_still_be_ended() -> None:
    """A supervisor that reaped the worker says so; the reason is worth keeping."""
    session = ended(opened("s1"), EXPIRY + 100, reason="reaped")

    assert session.status(EXPIRY + 100) is SessionStatus.ENDED


def test_end_of_an_unknown_session_is_refused() -> None:
    with pytest.raises(SessionNotLive, match=r"^worker session 's1' is unknown$"):
        decide_session(None, EndSession("s1", "gone"), T0)


@pytest.mark.parametrize(("reason", "stored"), [("x" * 1_000, "x" * 200), ("", "ended")])
def test_end_reason_is_kept_short_and_never_empty(reason: str, stored: str) -> None:
    assert ended(opened("s1"), reason=reason).ended_reason == stored


def test_folding_the_events_rebuilds_the_decided_state() -> None:
    state: WorkerSession | None = None
    history: list[SessionEvent] = []
    steps: list[tuple[SessionCommand, int]] = [
        (OpenSession("s1", SESSION_MS, CAPACITY), T0),
        (RenewSession("s1", SESSION_MS, 3, CAPACITY), T0 + 5_000),
        (RenewSession("s1", 1, 4, CAPACITY), T0 + 6_000),
        (EndSession("s1", "shutdown"), T0 + 7_000),
        (EndSession("s1", "again"), T0 + 8_000),
    ]
    for command, now in steps:
        state, events = run_session(state, command, now)
        history += events

    assert fold_session(history) == state
    assert [e.version for e in history] == [1, 2, 3, 4]
    assert state == WorkerSession(
        session_id="s1",
        version=4,
        expires_at_ms=T0 + 5_000 + SESSION_MS,
        held=4,
        capacity=CAPACITY,
        ended_reason="shutdown",
        opened_at_ms=T0,
        updated_at_ms=T0 + 7_000,
    )


def test_only_opening_ending_and_a_found_expiry_are_logged() -> None:
    assert set(SESSION_LOG_EVENTS) == {SessionOpened, SessionEnded, SessionExpired}


def test_an_expiry_found_is_recorded_with_when_it_ran_out_and_who_found_it() -> None:
    session = renewed(opened("s1"), T0 + 1_000)
    found = T0 + 1_000 + SESSION_MS + 700

    session, events = run_session(session, NoteExpiry("s1", "s2"), found)

    assert events == [
        SessionExpired(
            session_id="s1",
            version=3,
            at_ms=found,
            expired_at_ms=T0 + 1_000 + SESSION_MS,
            found_by="s2",
        )
    ]
    assert session.expiry_noted
    assert session.status(found) is SessionStatus.EXPIRED  # still expired, not ended
    assert session.expires_at_ms == T0 + 1_000 + SESSION_MS


def test_an_expiry_is_recorded_once_and_the_first_finder_stands() -> None:
    session = run_session(opened("s1"), NoteExpiry("s1", "s2"), EXPIRY + 1)[0]

    assert decide_session(session, NoteExpiry("s1", "s3"), EXPIRY + 50) == []


def test_no_expiry_is_recorded_for_an_ended_session() -> None:
    """Its SessionEnded says how it died; an expiry after it would contradict it."""
    session = ended(opened("s1"), T0 + 1)

    assert decide_session(session, NoteExpiry("s1", "s2"), EXPIRY + 1) == []
    assert not session.expiry_noted


def test_an_open_or_renewed_session_has_no_expiry_noted() -> None:
    assert not opened("s1").expiry_noted
    assert not renewed(opened("s1"), EXPIRY).expiry_noted


def test_a_live_session_cannot_be_found_expired() -> None:
    with pytest.raises(
        InvalidCommand,
        match=rf"^worker session 's1' has not expired: it is live until {EXPIRY} \(now {EXPIRY}\)$",
    ):
        decide_session(opened("s1"), NoteExpiry("s1", "s2"), EXPIRY)


def test_an_expiry_of_an_unknown_session_or_by_nobody_is_refused() -> None:
    with pytest.raises(SessionNotLive, match=r"^worker session 's1' is unknown$"):
        decide_session(None, NoteExpiry("s1", "s2"), T0)
    with pytest.raises(InvalidCommand, match=r"^found_by must be the finder's session id"):
        decide_session(opened("s1"), NoteExpiry("s1", ""), EXPIRY + 1)


def test_evolve_refuses_an_expiry_before_the_session_ran_out_or_after_it_ended() -> None:
    early = SessionExpired(
        session_id="s1", version=2, at_ms=EXPIRY, expired_at_ms=EXPIRY, found_by="s2"
    )

    with pytest.raises(InvalidTransition, match="cannot follow session 's1'"):
        evolve_session(opened("s1"), early)
    with pytest.raises(InvalidTransition, match="cannot follow session 's1'"):
        evolve_session(ended(opened("s1")), attrs.evolve(early, version=3, at_ms=EXPIRY + 1))


def test_fold_of_no_events_is_no_session() -> None:
    assert fold_session([]) is None


def test_evolve_refuses_a_second_opening_and_a_gap_in_versions() -> None:
    session = opened("s1")
    reopen = SessionOpened(session_id="s1", version=2, at_ms=T0, expires_at_ms=1, capacity=1)
    skipped = SessionEnded(session_id="s1", version=3, at_ms=T0, reason="x")

    with pytest.raises(InvalidTransition, match="cannot be opened twice"):
        evolve_session(session, reopen)
    with pytest.raises(InvalidTransition, match=r"^SessionEnded v3 cannot follow session 's1'$"):
        evolve_session(session, skipped)
    with pytest.raises(InvalidTransition, match="cannot follow session"):
        evolve_session(None, attrs.evolve(skipped, version=1))


def test_decide_refuses_a_state_of_another_session_and_an_unknown_command() -> None:
    @attrs.frozen
    class Hibernate:
        session_id: str

    with pytest.raises(InvalidCommand, match=r"^command and state name different sessions$"):
        decide_session(opened("s1"), EndSession("s2", "x"), T0)
    with pytest.raises(InvalidCommand, match=r"^unknown session command Hibernate$"):
        decide_session(opened("s1"), Hibernate("s1"), T0)  # type: ignore[arg-type]


@pytest.mark.parametrize("ended_reason", [None, "shutdown"])
@pytest.mark.parametrize("now_ms", [EXPIRY - 1, EXPIRY, EXPIRY + 1])
def test_is_live_is_the_status_live(ended_reason: str | None, now_ms: int) -> None:
    session = WorkerSession("w#1", 1, EXPIRY, ended_reason=ended_reason)
    assert session.is_live(now_ms) is (session.status(now_ms) is SessionStatus.LIVE)
