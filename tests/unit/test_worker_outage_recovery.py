"""After a store outage that fenced the whole fleet, the orphans are taken as soon as the
workers have sessions again, not a reconcile interval later (found by tests/chaos, in the
short suite and the soak: every worker scanned the moment the store answered again, while its
session was still being reopened, found the orphans with no room to take them, and counted
the scan as done until the next interval)."""

from tests.support.fleet import Fleet

CONNECTIONS = [f"c{i}" for i in range(6)]


async def test_a_whole_fleet_outage_of_three_leases_recovers_within_a_few_leases(
    fleet: Fleet,
) -> None:
    members = [fleet.add_worker(name) for name in ("a", "b", "c")]
    for cid in CONNECTIONS:
        await fleet.start(cid)
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in CONNECTIONS), 10)
    lease_s = fleet.config.lease_ms / 1000

    for member in members:
        member.store.outage = True
    await fleet.clock.advance(3 * lease_s)
    assert not any(fleet.owner_of(c) for c in CONNECTIONS), "everyone fenced"
    for member in members:
        member.store.outage = False
        # Reopening backs off longer than reconciliation retries (as it did in the chaos run):
        # the first scan after the outage finds the orphans before any session is back.
        member.store.fail_next("OpenSession", 2)

    took = await fleet.clock.run_until(
        lambda: all(fleet.owner_of(c) for c in CONNECTIONS), fleet.config.reconcile_interval_s
    )
    assert took <= 2 * lease_s, took
