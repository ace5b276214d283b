"""The fleet simulation's own invariants at its smallest size (bench/sim: the real worker code,
many workers in one process on virtual time over a cost model of DynamoDB): through an AZ loss
no connection ever has two owners, every STARTed connection streams again, and the model
counted what it should."""

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
    assert figures["store_requests_per_s"] > 0  # the model saw the traffic
    assert figures["throttled_requests"] == 0  # nothing near a partition's limit here


async def test_steady_state_moves_nothing() -> None:
    figures = await run_scenario("steady", SimSize(10, 200), settle_s=10, window_s=20)

    assert (figures["moves"], figures["two_owners"], figures["not_streaming_at_end"]) == (0, 0, 0)
