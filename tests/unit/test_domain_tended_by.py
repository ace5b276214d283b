"""Who sees to a dead session's leftovers (domain/balance.py `tended_by`): one live session,
the same for every worker that reads the same sessions, the dead spread over the living."""

from collections import Counter

from domain.balance import tended_by

LIVE = [f"w{i:03d}#1" for i in range(60)]
DEAD = [f"gone{i:04d}#1" for i in range(3000)]


def test_no_one_tends_when_no_one_lives() -> None:
    assert tended_by(["gone#1"], []) == {}


def test_every_reader_of_the_same_sessions_names_the_same_one_in_any_order() -> None:
    tenders = tended_by(DEAD, LIVE)

    assert tenders == tended_by(reversed(DEAD), list(reversed(LIVE)))
    assert set(tenders) == set(DEAD)
    assert set(tenders.values()) <= set(LIVE)


def test_the_dead_spread_over_the_living() -> None:
    """3,000 dead over 60 live: 50 each on average; none tends more than twice that."""
    counts = Counter(tended_by(DEAD, LIVE).values())
    assert set(counts) == set(LIVE)
    assert max(counts.values()) <= 100
