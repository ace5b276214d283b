"""Every refusal names what is wrong (an operator reads it in a 409 or a log line) and limits
are exact at their boundaries. Found by mutation testing (`make mutants`, bench/MUTANTS.md):
these survived the domain's tests."""

import attrs
import pytest

from domain import (
    Acquire,
    ConnectionNotFound,
    InvalidCommand,
    InvalidTransition,
    LeaseLost,
    LeaseUnavailable,
    Release,
    SessionEvent,
    SessionNotLive,
    SessionOpened,
    decide,
    evolve_session,
)
from domain.codec import event_from_dict
from domain.identifiers import MAX_URL_LENGTH, validate_session_id, validate_ws_url
from tests.unit.domain_given import CID, EXPIRY, LIVE, T0, leased, live_at, run, started

SESSION_ID_RULE = r"^a worker session id must be 1-256 printable characters$"


def test_a_session_id_of_256_characters_is_valid_and_of_257_is_not() -> None:
    assert validate_session_id("s" * 256) == "s" * 256
    with pytest.raises(InvalidCommand, match=SESSION_ID_RULE):
        validate_session_id("s" * 257)
    with pytest.raises(InvalidCommand, match=SESSION_ID_RULE):
        validate_session_id("")


def test_a_command_for_another_connection_is_refused_by_name() -> None:
    with pytest.raises(InvalidCommand, match=r"^command and state name different connections$"):
        decide(started(), Acquire("another", "s1"), T0, LIVE)


def test_an_unknown_command_is_refused_naming_its_type() -> None:
    @attrs.frozen
    class Teleport:
        connection_id: str

    with pytest.raises(InvalidCommand, match=r"^unknown command Teleport$"):
        decide(started(), Teleport(CID), T0)  # type: ignore[arg-type]


def test_releasing_a_connection_never_started_names_it() -> None:
    with pytest.raises(ConnectionNotFound, match=f"^connection '{CID}' was never started$"):
        decide(None, Release(CID, "s1", 1, 0), T0)


def test_a_stale_token_after_a_release_is_not_called_a_takeover() -> None:
    """Released by a later owner (no owner now, a newer token): the stale holder lost its
    token, but nobody holds the lease, so nobody "took it over"."""
    conn = leased("s1")
    released, _ = run(conn, Release(CID, "s1", conn.token, 0), T0 + 1)
    again, _ = run(released, Acquire(CID, "s2"), T0 + 2)
    free, _ = run(again, Release(CID, "s2", again.token, 0), T0 + 3)
    assert (free.owner, free.token) == ("", conn.token + 1)

    with pytest.raises(LeaseLost, match=rf"^'s1' no longer holds token 1 on '{CID}'$"):
        decide(free, Release(CID, "s1", conn.token, 0), T0 + 4)


def test_a_takeover_is_named_with_the_new_owner_and_both_tokens() -> None:
    first = leased("s1")
    fleet = live_at(EXPIRY + 1, "s2")
    taken, _ = run(first, Acquire(CID, "s2"), EXPIRY + 1, fleet)

    with pytest.raises(
        LeaseLost, match=rf"^lease on '{CID}' was taken over by 's2' \(token 2, yours 1\)$"
    ):
        decide(taken, Release(CID, "s1", first.token, 0), EXPIRY + 2, fleet)


def test_refusals_of_an_acquire_name_the_session_and_what_stands_in_the_way() -> None:
    with pytest.raises(SessionNotLive, match=r"^worker session 's9' is not live$"):
        decide(started(), Acquire(CID, "s9"), T0, LIVE)
    with pytest.raises(
        LeaseUnavailable, match=rf"^connection '{CID}' is leased by live session 's1'$"
    ):
        decide(leased("s1"), Acquire(CID, "s2"), T0 + 1, LIVE)


def test_an_event_without_a_type_is_refused_by_the_codec() -> None:
    with pytest.raises(InvalidTransition, match=r"^unknown event type None$"):
        event_from_dict({"connection_id": CID, "version": 1})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("wss:///no-host", "^ws_url has no host$"),
        ("ws://feeds.example.com:0/a", "^ws_url has port 0$"),
    ],
)
def test_url_refusals_say_exactly_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(InvalidCommand, match=message):
        validate_ws_url(url)


def test_a_url_of_exactly_the_length_limit_is_valid() -> None:
    url = "wss://feeds.example.com/"
    url += "a" * (MAX_URL_LENGTH - len(url))

    assert validate_ws_url(url) == url
    with pytest.raises(InvalidCommand, match=f"longer than {MAX_URL_LENGTH}"):
        validate_ws_url(url + "a")


def test_a_started_connection_is_stamped_with_its_start_time() -> None:
    assert started(T0 + 5).updated_at_ms == T0 + 5


def test_a_lease_is_held_by_its_owner_under_its_current_token_only() -> None:
    """After the same session released and took the connection again (token 2), its old token
    holds nothing; nor does another session presenting the current token."""
    first = leased("s1")
    released, _ = run(first, Release(CID, "s1", first.token, 0), T0 + 1)
    again, _ = run(released, Acquire(CID, "s1"), T0 + 2)
    assert again.token == first.token + 1
    assert again.is_held_by("s1", again.token, T0 + 3, LIVE)
    assert not again.is_held_by("s1", first.token, T0 + 3, LIVE)
    assert not again.is_held_by("s2", again.token, T0 + 3, LIVE)


def test_a_session_is_opened_only_as_its_first_event_and_only_at_version_one() -> None:
    first = SessionOpened(session_id="s1", version=1, at_ms=T0, expires_at_ms=T0 + 1, capacity=1)
    with pytest.raises(InvalidTransition, match=r"^session 's1' cannot be opened twice$"):
        evolve_session(evolve_session(None, first), first)  # version 1 again on a session
    with pytest.raises(InvalidTransition, match=r"^session 's1' cannot be opened twice$"):
        evolve_session(None, attrs.evolve(first, version=2))  # no session yet, version 2


def test_an_unknown_session_event_is_refused_naming_its_type() -> None:
    @attrs.frozen(kw_only=True)
    class SessionHibernated(SessionEvent):
        pass

    session = evolve_session(
        None,
        SessionOpened(session_id="s1", version=1, at_ms=T0, expires_at_ms=T0 + 1, capacity=1),
    )
    with pytest.raises(InvalidTransition, match=r"^unknown session event SessionHibernated$"):
        evolve_session(session, SessionHibernated(session_id="s1", version=2, at_ms=T0))
