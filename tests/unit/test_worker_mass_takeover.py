"""A dead worker's large share moves with bounded parallel acquisitions, not one at a time."""

import attrs

from tests.support.fleet import Fleet

SHARE = 80
STORE_LATENCY_S = 0.1  # every store call of the survivors takes this long


async def takeover_after_expiry(take_concurrency: int) -> float:
    """Virtual seconds from the moment the dead worker's last lease expired until the two
    survivors stream all of its connections."""
    fleet = Fleet(rate_per_s=1.0)
    config = attrs.evolve(fleet.config, take_concurrency=take_concurrency)
    try:
        fleet.add_worker("a", config)
        for i in range(SHARE):
            await fleet.start(f"c{i:02d}")
        ids = [f"c{i:02d}" for i in range(SHARE)]
        await fleet.clock.run_until(lambda: all(fleet.owner_of(c) == "a" for c in ids), 30)
        for name in ("b", "c"):
            fleet.add_worker(name, config).store.latency_s = STORE_LATENCY_S
        await fleet.clock.advance(6)  # past a heartbeat: every lease renewed at least once
        await fleet.crash("a")
        states = [await fleet.store.get(c) for c in ids]
        last_expiry_ms = max(s.expires_at_ms for s in states if s is not None)
        await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in ids), 120)
        return (fleet.clock.now_ms() - last_expiry_ms) / 1000
    finally:
        await fleet.close()


async def test_a_dead_workers_share_is_acquired_in_parallel() -> None:
    one_at_a_time = await takeover_after_expiry(take_concurrency=1)
    parallel = await takeover_after_expiry(take_concurrency=16)

    # 80 acquisitions at 0.1 s each shared by two survivors: about 4 s one at a time; with 16
    # in flight per loop, a few round trips (plus the reconciler's wake-up jitter).
    assert one_at_a_time >= SHARE * STORE_LATENCY_S / 2 * 0.9, one_at_a_time
    assert parallel <= 1.0, parallel
