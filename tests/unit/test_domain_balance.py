"""The balancing rule (domain/balance.py): even shares within capacities, hysteresis, bounded
handoffs, taking only up to one's share while another worker is short, and a fleet that
settles and then stays still."""

import random

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import WorkerSession
from domain.balance import Load, band, levels, loads_of, share_of, targets


def fleet(*held: int, capacity: int = 100) -> list[Load]:
    return [Load(f"w{i}", h, capacity) for i, h in enumerate(held, start=1)]


def share(loads: list[Load], me: str, max_hand_offs: int = 100, settle_after_ms: int = 0):  # type: ignore[no-untyped-def]
    mine = next(x for x in loads if x.session_id == me)
    return share_of(loads, mine, max_hand_offs=max_hand_offs, settle_after_ms=settle_after_ms)


def test_three_full_workers_and_three_new_ones_share_evenly() -> None:
    loads = fleet(100, 100, 100, 0, 0, 0)
    old, new = share(loads, "w1"), share(loads, "w4")
    assert (old.target, old.hand_off, old.room) == (50, 50, 0)
    assert (new.target, new.hand_off, new.room) == (50, 0, 50)
    assert old.imbalanced
    assert new.imbalanced


def test_handoffs_per_pass_are_bounded() -> None:
    assert share(fleet(100, 100, 100, 0, 0, 0), "w1", max_hand_offs=7).hand_off == 7


def test_within_the_band_nothing_moves() -> None:
    # mean 50, band 5: 55 and 45 are within it.
    loads = fleet(55, 45, 50, 50)
    for me in ("w1", "w2", "w3", "w4"):
        assert share(loads, me).hand_off == 0
        assert not share(loads, me).imbalanced


def test_one_past_the_band_moves_only_down_to_the_target() -> None:
    loads = fleet(56, 44, 50, 50)
    assert share(loads, "w1").hand_off == 6
    assert share(loads, "w2").room == 6
    assert share(loads, "w3").room == 0  # at its target while w2 is short: leave it to w2
    assert share(fleet(54, 46, 50, 50), "w3").room == 50  # nobody short beyond the band


def test_a_worker_short_of_its_share_makes_the_heavy_ones_give_even_within_their_band() -> None:
    # Nobody is more than 5 above the mean (50), but w4 is 15 below it.
    loads = fleet(55, 55, 55, 35)
    assert [share(loads, w).hand_off for w in ("w1", "w2", "w3")] == [5, 5, 5]
    assert share(loads, "w4").room == 15


def test_small_fleets_use_a_band_of_one_connection() -> None:
    assert band(2.0) == 1.0
    assert band(50.0) == 5.0
    # Ten over six: shares 2,2,2,2,1,1. The heaviest keep the extra ones; one 2 moves.
    loads = fleet(2, 2, 2, 2, 2, 0)
    assert [share(loads, f"w{i}").hand_off for i in range(1, 7)] == [0, 0, 0, 0, 1, 0]
    assert share(loads, "w6").room == 1


def test_rounding_alone_never_moves_anything() -> None:
    loads = fleet(11, 10, 10)
    assert all(share(loads, w).hand_off == 0 for w in ("w1", "w2", "w3"))


def test_capacity_bounds_the_share_and_the_rest_is_shared_by_the_others() -> None:
    loads = [Load("small", 10, 10), Load("big1", 45, 100), Load("big2", 45, 100)]
    assert levels(loads) == {"small": 10.0, "big1": 45.0, "big2": 45.0}
    loads = [Load("small", 0, 10), Load("big1", 90, 100), Load("big2", 0, 100)]
    assert targets(loads) == {"small": 10, "big1": 40, "big2": 40}
    assert share(loads, "big1").hand_off == 50
    assert share(loads, "small").room == 10


def test_a_fleet_holding_more_than_its_capacity_keeps_everyone_full() -> None:
    loads = [Load("a", 10, 10), Load("b", 20, 20)]
    assert targets(loads) == {"a": 10, "b": 20}
    assert share(loads, "a") == share(loads, "a")  # deterministic
    assert share(loads, "a").hand_off == 0
    assert share(loads, "a").room == 0


def test_when_nobody_is_short_anyone_takes_up_to_its_capacity() -> None:
    """A new START (or an orphan) must never wait for a worker below its share to exist."""
    loads = fleet(10, 10, 10)
    assert share(loads, "w1").room == 90
    # Also an empty fleet: the first STARTs are taken by whoever sees them.
    assert share(fleet(0, 0), "w1").room == 100


def test_no_handoff_until_every_other_worker_reported_after_the_last_one() -> None:
    loads = [Load("w1", 100, 100, 5_000), Load("w2", 0, 100, 4_999)]
    assert share(loads, "w1", settle_after_ms=5_000).hand_off == 0
    assert share(loads, "w1", settle_after_ms=4_999).hand_off == 50


def test_own_load_is_what_the_worker_holds_now_not_its_last_report() -> None:
    loads = fleet(100, 50)
    me = Load("w1", 50, 100)  # it handed off 50 since it last renewed; w2 took them
    assert share_of(loads, me, max_hand_offs=100).hand_off == 0


def test_handed_off_connections_not_yet_reported_by_their_taker_would_be_shed_twice() -> None:
    """Why the settle rule exists: until the taker reports them, the fleet seems to hold less,
    and the giver's target drops with it."""
    me = Load("w1", 50, 100, 1_000)
    stale = [Load("w1", 100, 100, 1_000), Load("w2", 0, 100, 900)]
    assert share_of(stale, me, max_hand_offs=100).hand_off == 25
    assert share_of(stale, me, max_hand_offs=100, settle_after_ms=1_000).hand_off == 0


def test_a_worker_that_took_since_the_others_reported_is_not_held_back_by_its_share() -> None:
    """A burst: each worker counts its own takes now and the others' as of their reports, so
    each seems above a target the others are far below; held back on that, all would decline
    the same hints. Until every other worker reported after its last take, it takes by
    capacity (balancing evens the burst out afterwards)."""
    view = [Load("w1", 0, 100, 1_000), Load("w2", 0, 100, 1_000), Load("w3", 0, 100, 1_000)]
    me = Load("w1", 10, 100)  # took ten STARTs since it last looked, at 1_400 the last
    assert share_of(view, me, max_hand_offs=10).room == 0  # the view alone holds it back
    assert share_of(view, me, max_hand_offs=10, last_take_ms=1_400).room == 90
    caught_up = [attrs.evolve(x, reported_at_ms=1_400) for x in view]
    assert share_of(caught_up, me, max_hand_offs=10, last_take_ms=1_400).room == 0
    # Nor is a handoff asked for on that view: the others may have taken as much.
    assert share_of(view, me, max_hand_offs=10).hand_off == 6
    assert share_of(view, me, max_hand_offs=10, last_take_ms=1_400).hand_off == 0
    assert share_of(caught_up, me, max_hand_offs=10, last_take_ms=1_400).hand_off == 6


def test_only_live_sessions_count_and_a_leaving_one_keeps_its_capacity_of_0() -> None:
    sessions = [
        WorkerSession("w1", 1, expires_at_ms=10_000, held=30, capacity=100, updated_at_ms=9),
        WorkerSession("w2", 1, expires_at_ms=500, held=30, capacity=100),
        WorkerSession("w3", 1, expires_at_ms=10_000, held=7, capacity=0),
        WorkerSession("w4", 1, expires_at_ms=10_000, held=1, capacity=5, ended_reason="bye"),
    ]
    assert sessions[2].leaving
    assert not sessions[0].leaving
    assert loads_of(sessions, 1_000) == [Load("w1", 30, 100, 9), Load("w3", 7, 0, 0)]


@pytest.mark.parametrize("by_load", [False, True])
def test_a_leaving_workers_connections_are_split_among_the_others(by_load: bool) -> None:
    """A shutting-down worker reports a capacity of 0: the others' levels are the split of
    everything, its connections too, so a worker at its share has room for its part of them
    before any hint of the leaver's reaches it (a worker at its share receives none)."""
    view = [Load("old", 10, 100), Load("me", 10, 100), Load("leaver", 10, 0)]
    if by_load:
        view = [attrs.evolve(x, rate=10.0 * x.held) for x in view]  # every connection alike

    mine = share_of(view, view[1], max_hand_offs=10, by_load=by_load)

    assert mine.level == pytest.approx(15 if not by_load else 165)
    assert mine.room == 5
    assert levels(view)["leaver"] == 0


@pytest.mark.parametrize("by_load", [False, True])
def test_nobody_hands_off_toward_a_worker_in_its_join_grace_yet_all_hold_back_for_it(
    by_load: bool,
) -> None:
    """A new worker's session within its join grace: the others, at their share without it,
    hand it nothing; with it they are above theirs, so they take nothing either, and what
    comes (a rolling deploy's leaver's connections) goes to it."""
    view = [Load("old", 20, 100), Load("me", 20, 100), Load("new", 0, 100, joining=True)]

    mine = share_of(view, view[1], max_hand_offs=10, by_load=by_load)
    after = share_of([*view[:2], attrs.evolve(view[2], joining=False)], view[1], max_hand_offs=10)
    new = share_of(view, view[2], max_hand_offs=10, by_load=by_load)

    assert (mine.hand_off, mine.imbalanced, mine.room) == (0, False, 0)
    assert (after.hand_off, after.imbalanced) == (6, True)  # past the grace: balanced toward
    assert new.room == 13
    assert new.imbalanced


def test_a_session_opened_within_the_join_grace_is_joining() -> None:
    sessions = [
        WorkerSession("old", 1, expires_at_ms=90_000, opened_at_ms=1_000),
        WorkerSession("new", 1, expires_at_ms=90_000, opened_at_ms=31_001),
    ]
    assert [x.joining for x in loads_of(sessions, 61_000, join_grace_ms=30_000)] == [False, True]
    assert [x.joining for x in loads_of(sessions, 61_001, join_grace_ms=30_000)] == [False, False]
    assert not any(x.joining for x in loads_of(sessions, 31_001))


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_hand_offs"):
        share(fleet(1), "w1", max_hand_offs=-1)


# -- properties -------------------------------------------------------------------------------

loads_strategy = st.lists(
    st.tuples(st.integers(0, 120), st.integers(1, 120)), min_size=1, max_size=12
).map(lambda pairs: [Load(f"w{i:02}", min(h, c), c) for i, (h, c) in enumerate(pairs)])


@given(loads_strategy)
def test_targets_sum_to_what_is_held_within_capacity_and_within_one_of_the_level(
    loads: list[Load],
) -> None:
    target, level = targets(loads), levels(loads)
    assert sum(target.values()) == min(sum(x.held for x in loads), sum(x.capacity for x in loads))
    for x in loads:
        assert 0 <= target[x.session_id] <= x.capacity
        assert abs(target[x.session_id] - level[x.session_id]) < 1 + 1e-9


@given(loads_strategy, st.integers(0, 20), st.integers(0, 2_000))
def test_a_worker_hands_off_only_its_excess_and_takes_only_what_it_has_room_for(
    loads: list[Load], bound: int, last_take_ms: int
) -> None:
    for me in loads:
        s = share_of(loads, me, max_hand_offs=bound, last_take_ms=last_take_ms)
        assert 0 <= s.hand_off <= min(bound, max(0, me.held - s.target))
        assert 0 <= s.room <= me.capacity - me.held
        assert not (s.hand_off and s.room), "never sheds and takes at once"


def simulate(
    loads: list[Load], rng: random.Random, *, rounds: int, bound: int, stale: bool
) -> tuple[list[int], bool]:
    """Passes of the whole fleet: every worker decides, the handed-off connections go to a
    pool, and workers take from it in random order up to their room (or, if none has room,
    anyone with capacity: nothing stays orphaned), as the worker does: a giver does not take back
    what it just gave, and a worker that took since its view was reported takes by capacity
    (`last_take_ms`). When `stale`, each worker sees the others'
    loads of one pass before (reported at that pass), and settles as the worker does: no
    handoff until the others reported after its last one. Returns the handoffs of each pass and
    whether the fleet ended within its bands."""
    held = {x.session_id: x.held for x in loads}
    caps = {x.session_id: x.capacity for x in loads}
    seen, seen_at = dict(held), 0
    last_hand_off = {w: -1 for w in held}
    last_take = {w: 0 for w in held}
    moves = []
    for r in range(1, rounds + 1):
        view = [Load(w, seen[w], caps[w], seen_at) for w in held]
        before = dict(held)
        pool = 0
        for w in held:
            s = share_of(
                view,
                Load(w, held[w], caps[w]),
                max_hand_offs=bound,
                settle_after_ms=last_hand_off[w] + 1,
                last_take_ms=last_take[w],
            )
            held[w] -= s.hand_off
            pool += s.hand_off
            if s.hand_off:
                last_hand_off[w] = r
        moves.append(pool)
        # As the worker does (Sessions: handed off lately), a giver does not take back what
        # it just handed off while another worker has the capacity for it.
        givers = {w for w in held if last_hand_off[w] == r}
        order = list(held)
        while pool:
            rng.shuffle(order)
            took = False
            for w in order:
                me = Load(w, held[w], caps[w])
                s = share_of(view, me, max_hand_offs=bound, last_take_ms=last_take[w])
                if pool and s.room > 0 and w not in givers:
                    held[w] += 1
                    pool -= 1
                    took = True
                    last_take[w] = r
            if not took:  # nobody has room by its view: anyone with capacity takes
                able = [w for w in order if held[w] < caps[w]]
                w = next((w for w in able if w not in givers), able[0])
                held[w] += 1
                pool -= 1
                last_take[w] = r
        seen, seen_at = (before, r - 1) if stale else (dict(held), r)
    final = [Load(w, held[w], caps[w]) for w in held]
    level = levels(final)
    return moves, all(abs(x.held - level[x.session_id]) <= band(level[x.session_id]) for x in final)


small_fleets = st.lists(
    st.tuples(st.integers(0, 40), st.integers(1, 40)), min_size=1, max_size=6
).map(lambda pairs: [Load(f"w{i}", min(h, c), c) for i, (h, c) in enumerate(pairs)])


@settings(max_examples=50, deadline=None)
@given(small_fleets, st.integers(1, 10), st.booleans(), st.randoms(use_true_random=False))
def test_a_fleet_converges_and_then_never_moves_again(
    loads: list[Load], bound: int, stale: bool, rng: random.Random
) -> None:
    """Each pass moves at least one connection until the fleet is within its bands (a settling
    worker waits two passes when its view is one pass old); after that nothing moves."""
    excess = sum(x.held for x in loads)
    quiet = 20
    rounds = 3 * (excess // bound + 1) + quiet
    moves, balanced = simulate(loads, rng, rounds=rounds, bound=bound, stale=stale)
    assert balanced, moves
    assert all(m == 0 for m in moves[-quiet:]), f"still moving: {moves}"


def test_unplaced_connections_are_split_and_each_takes_up_to_its_target() -> None:
    """A dead worker held 12: two survivors at 10 each split 32, level 16, so each takes 6
    of the 12 (not all 12, as by capacity alone, nor 7, the top of its band, which would
    leave the other short): together they take them all in one move, each at its level."""
    loads = [Load("a", 10, 100), Load("b", 10, 100)]

    share = share_of(loads, Load("a", 10, 100), max_hand_offs=10, unplaced=12)

    assert (share.level, share.target, share.takeover_room) == (16.0, 16, 6)
    other = share_of(loads, Load("b", 10, 100), max_hand_offs=10, unplaced=12)
    assert share.takeover_room + other.takeover_room == 12
    assert share_of(loads, Load("a", 10, 100), max_hand_offs=10).takeover_room == 0
    # One above its level already: the other survivor takes them all.
    heavy = share_of(loads, Load("a", 95, 100), max_hand_offs=10, unplaced=12)
    assert heavy.takeover_room == 0
    light = share_of([Load("a", 95, 100)], Load("b", 10, 100), max_hand_offs=10, unplaced=12)
    assert light.takeover_room == 12
