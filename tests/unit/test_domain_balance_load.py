"""Balance by load (domain/balance.py, issue 27): the smoothed rate, the weighting, the
share on load, and the hand-off choice with its hysteresis. Pure: time is an argument."""

import attrs
import pytest

from domain.balance import (
    MESSAGES_PER_CONNECTION,
    RATE_WINDOW_MS,
    Load,
    Rate,
    Share,
    cost,
    heavy,
    pick_hand_offs,
    place_heavy,
    share_of,
    smoothed,
)


def test_the_first_interval_is_taken_as_measured_then_the_mean_until_a_window() -> None:
    first = smoothed(Rate(), received=100, now_ms=10_000)
    assert (first.per_s, first.warm) == (0.0, False)  # a baseline, no estimate yet

    seeded = smoothed(first, received=300, now_ms=11_000)
    assert seeded.per_s == pytest.approx(200.0)  # moved in hot: counted hot at once

    # Within the first window, the plain mean of what was received since the baseline: one
    # interval's few messages do not stick (weighted as later ones, 3 of them in 0.5 s would
    # have counted 6 msg/s for a window).
    steady = smoothed(smoothed(Rate(), 0, 0), 3, 500)
    assert steady.per_s == pytest.approx(6.0)
    for beat in range(2, 21):  # 5 msg/s, sampled every 0.5 s: 2 or 3 a beat
        steady = smoothed(steady, 5 * beat // 2, beat * 500)
    assert steady.per_s == pytest.approx(5.0)

    # One window of silence after the first: by then a window's weight, 1 - 1/e of the way.
    warm = smoothed(first, received=100 + 200 * 30, now_ms=10_000 + RATE_WINDOW_MS)
    assert warm.per_s == pytest.approx(200.0)
    quiet = smoothed(warm, received=warm.received, now_ms=10_000 + 2 * RATE_WINDOW_MS)
    assert quiet.per_s == pytest.approx(200.0 / 2.718281828, rel=1e-3)
    assert smoothed(quiet, received=300, now_ms=quiet.at_ms or 0) == quiet  # no time, no change


def test_a_first_interval_shorter_than_asked_is_no_estimate_yet() -> None:
    taken = smoothed(Rate(), 0, 10_000)  # the baseline, when the connection was taken
    early = smoothed(taken, 1, 10_050, first_ms=250)
    assert early == taken  # 50 ms and one message: not 20 msg/s, nothing yet
    measured = smoothed(early, 5, 10_500, first_ms=250)
    assert measured.per_s == pytest.approx(10.0)
    assert measured.warm
    assert smoothed(measured, 6, 10_550, first_ms=250).warm  # later intervals are any length


def test_a_short_burst_moves_the_rate_by_a_fraction_of_its_size() -> None:
    rate = smoothed(smoothed(Rate(), 0, 0), 2 * 30, RATE_WINDOW_MS)  # a meeting at 2 msg/s
    for second in range(1, 4):  # three seconds at 200 msg/s
        rate = smoothed(rate, rate.received + 200, RATE_WINDOW_MS + second * 1_000)
    assert 2.0 < rate.per_s < 25.0  # not 200: three seconds of a 30 s window


def test_a_hot_feed_weighs_what_its_messages_cost_and_a_quiet_one_about_one() -> None:
    assert MESSAGES_PER_CONNECTION == 1.0
    assert cost(200.0) == pytest.approx(201.0)
    assert cost(2.0) == pytest.approx(3.0)
    assert cost(0.0) == 1.0
    assert Load("w1", held=10, capacity=100, rate=50.0).weight == pytest.approx(60.0)


def test_a_connection_is_heavy_at_twice_the_fleets_mean_cost() -> None:
    """At a mean of 2 msg/s a connection costs 3: heavy from 5 msg/s (cost 6). In a fleet of
    like connections none is."""
    assert heavy(5.0, 2.0)
    assert not heavy(4.9, 2.0)
    assert not heavy(2.0, 2.0)
    assert heavy(1.0, 0.0), "holding one open costs 1: an idle fleet's mean cost"


def test_a_leavers_heavy_connections_go_to_light_takers_below_the_level_quiet_ones_unnamed() -> (
    None
):
    """The most costly first, each to the taker whose connections are lightest of those below
    the level (it gives back what it held before); the light ones are left unnamed (anyone's
    by share)."""
    rates = [("quiet-1", 1.0), ("hot-1", 50.0), ("hot-2", 40.0), ("quiet-2", 1.0)]
    # Level: (30 + 25 + 40 + 51 + 41 + 2 + 2) / 3 = 63.7. w2 holds 15 quiet ones (mean cost
    # 2), w3 one hot feed and 3 quiet ones (6.25), w4 20 quiet ones.
    takers = [(30.0, 15, "w2"), (25.0, 4, "w3"), (40.0, 20, "w4")]
    placed = place_heavy(rates, takers, mean_per_s=4.0)
    # hot-1 to w2 (mean cost 2, w4's also 2: the lower id), w2 is then at 81: hot-2 to w4.
    assert placed == {"hot-1": "w2", "hot-2": "w4"}
    assert place_heavy(rates, [], mean_per_s=4.0) == {}
    assert place_heavy([("a", 2.0), ("b", 2.0)], takers, mean_per_s=2.0) == {}


def test_by_load_one_hot_feed_is_not_counted_as_one_quiet_one() -> None:
    """Same counts, one worker receives far more: by count nothing moves, by load it is out."""
    others = [Load("w2", 10, 100, rate=10.0), Load("w3", 10, 100, rate=10.0)]
    me = Load("w1", 10, 100, rate=210.0)

    by_count = share_of(others, me, max_hand_offs=10)
    by_load = share_of(others, me, max_hand_offs=10, by_load=True)

    assert not by_count.imbalanced
    assert by_count.hand_off == 0
    assert by_load.imbalanced
    assert by_load.excess > 0
    assert by_load.hand_off > 0
    assert by_load.level == pytest.approx((220 + 20 + 20) / 3)


def test_by_load_with_equal_rates_decides_as_by_count() -> None:
    loads = [Load("w2", 4, 100, rate=8.0), Load("w3", 4, 100, rate=8.0)]
    me = Load("w1", 16, 100, rate=32.0)
    by_count = share_of(loads, me, max_hand_offs=10)
    by_load = share_of(loads, me, max_hand_offs=10, by_load=True)
    assert by_count.imbalanced == by_load.imbalanced
    assert by_load.excess == pytest.approx(3 * by_count.excess)  # each connection weighs 3


def test_near_equal_workers_do_not_trade_a_connection() -> None:
    """Within a connection's cost of each other: no move would shrink their gap."""
    share = Share(30, 10, True, 10, 0, excess=1.0, band=3.0, weight=31.0)
    share = attrs.evolve(share, others=((29.0, 10, "w2"),))
    assert pick_hand_offs([("a", 3.0), ("b", 3.0)], share, count=10) == []


def test_the_moves_that_best_close_the_gap_are_chosen_the_heaviest_first() -> None:
    others = ((14.0, 10, "w2"), (14.0, 10, "w3"), (14.0, 10, "w4"))
    share = Share(34, 0, True, 10, 0, excess=58.0, band=3.4, weight=92.0, others=others)
    costs = [("cold1", 1.4), ("hot1", 21.0), ("cold2", 1.4), ("hot2", 21.0), ("hot3", 21.0)]
    costs += [("hot4", 21.0)]

    chosen = pick_hand_offs(costs, share, count=10)

    # 3 of 4 hot feeds, each meant for another worker: one each.
    assert chosen == [("hot1", "w2"), ("hot2", "w3"), ("hot3", "w4")]


def test_a_hot_feed_goes_where_it_shrinks_the_spread_not_where_it_moves_the_excess() -> None:
    """Five workers at a level of 20.4 (band 8.5, a quiet connection costs 6, a hot one 21)."""
    two_hot = Share(20.4, 0, True, 10, 0, excess=21.6, band=8.5, weight=42.0)
    two_hot = attrs.evolve(two_hot, others=((12.0, 2, "w2"), (18.0, 3, "w3")))
    assert pick_hand_offs([("hot1", 21.0), ("hot2", 21.0)], two_hot, 10) == [("hot1", "w2")]

    # One hot feed and two quiet ones, a little above 33 as measured: the hot one to the worker
    # at 12 would only swap the two (12 and 33), and that one would hand it on.
    one_hot = Share(20.4, 0, True, 10, 0, excess=13.1, band=8.5, weight=33.5)
    one_hot = attrs.evolve(one_hot, others=((12.0, 2, "w2"),))
    costs = [("hot", 21.0), ("a", 6.0), ("b", 6.0)]
    assert pick_hand_offs(costs, one_hot, 10) == [("a", "w2")]


def test_a_worker_stuck_with_two_heavy_feeds_swaps_one_with_a_light_taker() -> None:
    """Each hot feed weighs more than twice its excess: it hands one to the lightest worker if
    that one holds light connections to give back, never to one without."""
    stuck = Share(33.5, 0, True, 10, 0, excess=8.5, band=3.4, weight=42.0)
    light_taker = attrs.evolve(stuck, others=((28.0, 20, "w2"), (34.0, 20, "w3")))
    heavy_taker = attrs.evolve(stuck, others=((21.0, 1, "w2"),))
    costs = [("hot1", 21.0), ("hot2", 21.0)]

    assert pick_hand_offs(costs, light_taker, count=10) == [("hot1", "w2")]
    assert pick_hand_offs(costs, heavy_taker, count=10) == []  # would only pass it on


def test_by_load_survivors_parts_cover_a_dead_workers_connections() -> None:
    """Every survivor reads the same view: their takeover parts add up to at least the dead's
    connections (none left for the grace), and none takes more than one over its share."""
    survivors = [Load("w1", 10, 100, rate=30.0), Load("w2", 10, 100, rate=5.0)]
    survivors.append(Load("w3", 5, 100, rate=0.0))
    unplaced = 12
    parts = {
        me.session_id: share_of(survivors, me, max_hand_offs=0, unplaced=unplaced, by_load=True)
        for me in survivors
    }
    assert sum(p.takeover_room for p in parts.values()) >= unplaced
    unit = sum(x.weight for x in survivors) / sum(x.held for x in survivors)
    for me in survivors:
        share = parts[me.session_id]
        if share.takeover_room:  # its last take started below its level
            assert me.weight + (share.takeover_room - 1) * unit < share.level
    # The busiest (w1, 40) takes least; the idle one most.
    assert parts["w3"].takeover_room > parts["w2"].takeover_room >= parts["w1"].takeover_room


def test_by_load_a_taker_at_its_share_leaves_hints_to_workers_that_are_short() -> None:
    others = [Load("w2", 2, 100, rate=0.0, reported_at_ms=5), Load("w3", 10, 100, rate=30.0)]
    me = Load("w1", 10, 100, rate=30.0)
    share = share_of(others, me, max_hand_offs=10, by_load=True)
    short = share_of([others[1], me], others[0], max_hand_offs=10, by_load=True)
    assert share.room == 0  # above its level while w2 is short: takes nothing
    assert short.room > 0
