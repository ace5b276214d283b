"""The balancing rule at its edges: a fleet holding more than its capacity, a worker exactly at
its band or its target, a capacity of one, the defaults. Found by mutation testing (`make
mutants`, bench/MUTANTS.md): each of these survived tests/unit/test_domain_balance.py."""

from domain import WorkerSession
from domain.balance import Load, levels, loads_of, share_of


def test_a_fleet_holding_more_than_all_its_capacity_levels_everyone_at_its_capacity() -> None:
    # 45 held where 30 fit (a worker restarted with a smaller capacity, say): nobody's level
    # is above what it can hold, and the share says so.
    loads = [Load("a", 20, 10), Load("b", 25, 20)]
    assert levels(loads) == {"a": 10.0, "b": 20.0}
    assert share_of(loads, loads[0], max_hand_offs=5).level == 10.0


def test_the_levels_of_no_workers_are_none() -> None:
    assert levels([]) == {}


def test_a_capacity_of_one_is_a_reported_capacity() -> None:
    """Only 0 means "never reported"; a worker configured for one connection may take it."""
    session = WorkerSession("w1", 1, expires_at_ms=10_000, held=0, capacity=1)
    assert loads_of([session], 1_000) == [Load("w1", 0, 1, 0)]


def test_without_a_settle_instant_a_worker_hands_off_at_once() -> None:
    loads = [Load("w1", 100, 100), Load("w2", 0, 100)]  # never reported: at 0 ms
    assert share_of(loads, loads[0], max_hand_offs=100).hand_off == 50


def test_the_share_reports_this_workers_level() -> None:
    loads = [Load("w1", 30, 100), Load("w2", 0, 100), Load("w3", 0, 100)]
    assert share_of(loads, loads[1], max_hand_offs=1).level == 10.0


def test_a_worker_within_its_band_of_the_level_is_not_short() -> None:
    """Level 10, band 1: w1 at 9 is within it, so nobody is short and w2 (above its target,
    within its band too) may take up to its capacity, as anyone may when nobody is short."""
    loads = [Load("w1", 9, 100), Load("w2", 11, 100)]
    s = share_of(loads, loads[1], max_hand_offs=10)
    assert (s.target, s.imbalanced, s.hand_off, s.room) == (10, False, 0, 89)


def test_at_its_target_in_an_imbalanced_fleet_a_worker_takes_freely_if_nobody_is_short() -> None:
    """w1 is past its band (12 of level 10) and will hand off; nobody is short by more than
    the band. w2 at its target may take up to its capacity: limiting it to its target would
    leave the hints of new STARTs to nobody in particular."""
    loads = [Load("w1", 12, 100), Load("w2", 10, 100), Load("w3", 9, 100), Load("w4", 9, 100)]
    s = share_of(loads, loads[1], max_hand_offs=10)
    assert (s.target, s.imbalanced, s.hand_off, s.room) == (10, True, 0, 90)
