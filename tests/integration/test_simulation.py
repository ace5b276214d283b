"""The fleet simulation's own invariants at its smallest size (bench/sim: the real worker code,
many workers in one process on virtual time over a cost model of DynamoDB): through an AZ loss
no connection ever has two owners, every STARTed connection streams again, and the model
counted what it should."""

import pytest

from application.config import WorkerConfig
from bench.sim.fleet import SimSize
from bench.sim.scenarios import run_scenario


async def test_an_az_loss_at_the_smallest_size_leaves_no_connection_unowned_or_double_owned() -> (
    None
):
    figures = await run_scenario("az-loss", SimSize(10, 200), settle_s=10, window_s=20)

    assert figures["two_owners"] == 0, figures["notes"]
    assert figures["not_streaming_at_end"] == 0
    assert figures["connections_moved"] == 60  # the 3 killed workers' 20 each
    assert figures["streaming_again_s"]["n"] == 60
    # The killed workers' streams, each streaming again (none at inf: not yet).
    assert figures["orphans_streaming_again_s"]["n"] == 60
    assert figures["orphans_streaming_again_s"]["max"] < 20
    assert figures["store_requests_per_s"] > 0  # the model saw the traffic
    assert figures["throttled_requests"] == 0  # nothing near a partition's limit here


async def test_steady_state_moves_nothing() -> None:
    figures = await run_scenario("steady", SimSize(10, 200), settle_s=10, window_s=20)

    assert (figures["moves"], figures["two_owners"], figures["not_streaming_at_end"]) == (0, 0, 0)


async def test_a_reported_az_loss_places_each_orphan_once() -> None:
    # The supervisor's hints name the dead sessions, and each survivor takes its part of
    # them: before, the first pollers took a whole batch each (10 of 60 where the parts were
    # 8-9) and balancing moved 8 connections a second time.
    figures = await run_scenario("az-loss-reported", SimSize(10, 200), settle_s=10, window_s=20)

    assert figures["two_owners"] == 0, figures["notes"]
    assert figures["not_streaming_at_end"] == 0
    assert (figures["connections_moved"], figures["moves"]) == (60, 60)
    assert figures["streaming_again_s"]["max"] < 4.0  # by the hints, not the lease's expiry


@pytest.mark.parametrize("balance_by", ["count", "load"])
async def test_a_scale_out_moves_each_connection_it_moves_once(balance_by: str) -> None:
    """10 workers holding 200, 10 join: the newcomers' half moves, each connection once. By
    count exactly 100 (whole targets); by load, whose band is one connection at the mean
    cost, a newcomer may end one short of its 10 (like connections whose measured rates
    differ a little: 99 at `ceb7218`; README, "Balancing weighs load")."""
    size = SimSize(10, 200)
    config = WorkerConfig(max_connections=size.capacity, balance_by=balance_by)
    figures = await run_scenario("scale-out", size, settle_s=10, window_s=20, config=config)

    assert figures["two_owners"] == 0, figures["notes"]
    assert any("balanced" in note for note in figures["notes"]), figures["notes"]
    assert figures["moves"] == figures["connections_moved"], "a connection moved twice"
    if balance_by == "count":
        assert figures["moves"] == 100  # the newcomers' half
    else:
        assert 90 <= figures["moves"] <= 100  # each of the 10 newcomers within one of 10
