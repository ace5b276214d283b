"""The order workers try a shared set of orphans in (domain/balance.py `take_order`): workers
of one view start on different orphans, and every one of them is in every worker's order."""

import zlib
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from domain.balance import take_order


def _slot(connection_id: str, live: list[str]) -> str:
    """The worker whose slot a connection falls in: the rule's hash over the sorted ring."""
    ring = sorted(live)
    return ring[zlib.crc32(connection_id.encode()) % len(ring)]


ids = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=200, unique=True)


@given(ids, st.integers(min_value=1, max_value=20))
def test_every_worker_orders_all_of_them_and_each_is_first_choice_of_one(
    orphans: list[str], workers: int
) -> None:
    live = [f"w{i}#1" for i in range(workers)]
    orders = {me: take_order(orphans, me, live) for me in live}
    assert all(sorted(order) == sorted(orphans) for order in orders.values())
    # Each worker's own slot is where its order starts, before any orphan of another slot:
    # the orphans each worker tries first partition the set.
    firsts: Counter[str] = Counter()
    for me, order in orders.items():
        own = [c for c in order if _slot(c, live) == me]
        assert order[: len(own)] == own
        firsts.update(own)
    assert set(firsts) == set(orphans)
    assert set(firsts.values()) == {1}


def test_a_worker_not_yet_in_its_view_orders_them_too() -> None:
    assert sorted(take_order(["a", "b", "c"], "new#1", ["w1#1", "w2#1"])) == ["a", "b", "c"]


def test_two_workers_of_100_orphans_start_on_different_halves() -> None:
    orphans = [f"c{i:03}" for i in range(100)]
    first, second = (take_order(orphans, me, ["w1#1", "w2#1"]) for me in ("w1#1", "w2#1"))
    assert not set(first[:30]) & set(second[:30])
