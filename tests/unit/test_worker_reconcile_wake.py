"""Reconciliation never sleeps past a lease that was granted after it last looked (found by
tests/chaos: a worker that had scanned an empty store slept the whole reconcile interval, so
a connection started and taken by another worker that then died waited for that interval —
a minute at the default timings — instead of about one lease)."""

from tests.support.fleet import Fleet


async def test_a_connection_started_after_an_idle_scan_moves_one_lease_after_its_owner_dies(
    fleet: Fleet,
) -> None:
    fleet.add_worker("a")
    fleet.add_worker("b")
    await fleet.clock.advance(1)  # both have scanned an empty store: nothing to wake for
    await fleet.start("c1")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") is not None, 5)
    owner = fleet.owner_of("c1")
    survivor = "b" if owner == "a" else "a"

    await fleet.crash(owner or "")
    took = await fleet.clock.run_until(lambda: fleet.owner_of("c1") == survivor, 120)

    config = fleet.config
    assert took <= config.lease_ms / 1000 + config.heartbeat_interval_s + 1, took
    assert took < config.reconcile_interval_s / 2
