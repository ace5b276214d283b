"""Every refusal names what is wrong (an operator reads it in a 409 or a log line), limits are
exact at their boundaries, and the lease's remaining time is what the state says. Found by
mutation testing (`make mutants`, bench/MUTANTS.md): these survived the domain's tests."""

import attrs
import pytest

from domain import (
    Acquire,
    ConnectionNotFound,
    InvalidCommand,
    InvalidTransition,
    LeaseLost,
    Release,
    decide,
)
from domain.codec import event_from_dict
from domain.identifiers import MAX_URL_LENGTH, validate_worker_id, validate_ws_url
from tests.unit.domain_given import CID, LEASE_MS, T0, leased, run, started


def test_a_worker_id_of_256_characters_is_valid_and_of_257_is_not() -> None:
    assert validate_worker_id("w" * 256) == "w" * 256
    with pytest.raises(InvalidCommand, match=r"^worker id must be 1-256 characters$"):
        validate_worker_id("w" * 257)
    with pytest.raises(InvalidCommand, match=r"^worker id must be 1-256 characters$"):
        validate_worker_id("")


def test_a_command_for_another_connection_is_refused_by_name() -> None:
    with pytest.raises(InvalidCommand, match=r"^command and state name different connections$"):
        decide(started(), Acquire("another", "w1", LEASE_MS), T0)


def test_an_unknown_command_is_refused_naming_its_type() -> None:
    @attrs.frozen
    class Teleport:
        connection_id: str

    with pytest.raises(InvalidCommand, match=r"^unknown command Teleport$"):
        decide(started(), Teleport(CID), T0)  # type: ignore[arg-type]


def test_releasing_a_connection_never_started_names_it() -> None:
    with pytest.raises(ConnectionNotFound, match=f"^connection '{CID}' was never started$"):
        decide(None, Release(CID, "w1", 1, 0), T0)


def test_a_stale_token_after_a_release_is_not_called_a_takeover() -> None:
    """Released by a later owner (no owner now, a newer token): the stale holder lost its
    token, but nobody holds the lease, so nobody "took it over"."""
    conn = leased("w1")
    released, _ = run(conn, Release(CID, "w1", conn.token, 0), T0 + 1)
    again, _ = run(released, Acquire(CID, "w2", LEASE_MS), T0 + 2)
    free, _ = run(again, Release(CID, "w2", again.token, 0), T0 + 3)
    assert (free.owner, free.token) == ("", conn.token + 1)

    with pytest.raises(LeaseLost, match=rf"^'w1' no longer holds token 1 on '{CID}'$"):
        decide(free, Release(CID, "w1", conn.token, 0), T0 + 4)


def test_a_takeover_is_named_with_the_new_owner_and_both_tokens() -> None:
    first = leased("w1")
    taken, _ = run(first, Acquire(CID, "w2", LEASE_MS), T0 + LEASE_MS + 1)

    with pytest.raises(
        LeaseLost, match=rf"^lease on '{CID}' was taken over by 'w2' \(token 2, yours 1\)$"
    ):
        decide(taken, Release(CID, "w1", first.token, 0), T0 + LEASE_MS + 2)


def test_an_event_without_a_type_is_refused_by_the_codec() -> None:
    with pytest.raises(InvalidTransition, match=r"^unknown event type None$"):
        event_from_dict({"connection_id": CID, "version": 1})


def test_lease_remaining_is_the_time_to_expiry_while_held_and_zero_after() -> None:
    conn = leased("w1")  # expires at T0 + LEASE_MS

    assert conn.lease_remaining_ms(T0) == LEASE_MS
    assert conn.lease_remaining_ms(T0 + LEASE_MS - 1) == 1
    assert conn.lease_remaining_ms(T0 + LEASE_MS + 1) == 0
    assert started().lease_remaining_ms(T0) == 0


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
