"""A dead worker's large share moves with parallel acquisitions while the store answers fast,
and one at a time while it is slow (take_limit.py)."""

import attrs

from application.config import WorkerConfig
from application.worker.take_limit import TakeLimit
from tests.support.fleet import Fleet

SHARE = 80
STORE_LATENCY_S = 0.1  # every store call of the survivors takes this long: a fast store here
SLOW_STORE_S = 1.0  # an overloaded store (a third of the 3 s a session is trusted)


async def takeover_after_expiry(
    take_concurrency: int, store_latency_s: float = STORE_LATENCY_S, share: int = SHARE
) -> float:
    """Virtual seconds from the moment the dead worker's last lease expired until the two
    survivors stream all of its connections."""
    fleet = Fleet(rate_per_s=1.0)
    config = attrs.evolve(fleet.config, take_concurrency=take_concurrency)
    try:
        fleet.add_worker("a", config)
        for i in range(share):
            await fleet.start(f"c{i:02d}")
        ids = [f"c{i:02d}" for i in range(share)]
        await fleet.clock.run_until(lambda: all(fleet.owner_of(c) == "a" for c in ids), 30)
        for name in ("b", "c"):
            fleet.add_worker(name, config).store.latency_s = store_latency_s
        await fleet.clock.advance(6)  # past a heartbeat: the session renewed at least once
        last_expiry_ms = (await fleet.owner_session(ids[0])).expires_at_ms
        await fleet.crash("a")
        await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in ids), 300)
        return (fleet.clock.now_ms() - last_expiry_ms) / 1000
    finally:
        await fleet.close()


async def test_a_dead_workers_share_is_acquired_in_parallel() -> None:
    one_at_a_time = await takeover_after_expiry(take_concurrency=1)
    parallel = await takeover_after_expiry(take_concurrency=16)

    # 80 acquisitions at 0.1 s each shared by two survivors: about 4 s one at a time; with 16
    # in flight per loop, a few round trips (the sessions read that finds the death, the
    # scan, the waves of acquisitions) plus the reconciler's wake-up jitter.
    assert one_at_a_time >= SHARE * STORE_LATENCY_S / 2 * 0.9, one_at_a_time
    assert parallel <= 1.5, parallel


async def test_a_slow_store_gets_one_acquisition_at_a_time() -> None:
    # Parallel takes against an overloaded store feed its overload (bench/RESULTS.md): with
    # every call taking 1 s, the limit stays at one and 20 connections take ~10 s on two
    # survivors, as they would with take_concurrency=1.
    took = await takeover_after_expiry(16, store_latency_s=SLOW_STORE_S, share=20)
    assert took >= 20 * SLOW_STORE_S / 2 * 0.9, took


def test_the_limit_doubles_on_fast_waves_halves_on_slow_ones_and_resets_on_a_fence() -> None:
    limit = TakeLimit(WorkerConfig(take_concurrency=16))  # healthy: <= 0.7 s
    assert limit.current == 1
    for expected in (2, 4, 8, 16, 16):
        limit.after_wave(0.05)
        assert limit.current == expected
    limit.after_wave(0.9)
    assert limit.current == 8
    limit.after_wave(None)  # a failed acquisition
    assert limit.current == 4
    limit.fenced()
    assert limit.current == 1
    limit.after_wave(None)
    assert limit.current == 1
