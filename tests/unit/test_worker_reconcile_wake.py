"""Reconciliation never sleeps past a lease that was granted after it last looked (found by
tests/chaos: a worker that had scanned an empty store slept the whole reconcile interval, so
a connection started and taken by another worker that then died waited for that interval —
a minute at the default timings — instead of about one lease)."""

import itertools
from collections.abc import AsyncIterator, Sequence

from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from application.ports import ConnectionStore
from application.worker.loops import RECONCILE_SPREAD
from domain import Connection
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


async def test_a_lease_expiring_while_a_scan_takes_orphans_is_not_slept_past(
    fleet: Fleet,
) -> None:
    """GIVEN a dead worker's two leases expiring about half a second apart and a survivor
    whose store calls are slow, WHEN the survivor's scan takes the first, THEN it takes the
    second as soon as that one expires too (found by tests/chaos: the second lease expired
    between the scan and the query for the next expiry, which then looked only past it, so it
    waited about a lease more)."""
    fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(0.5)
    await fleet.start_streamed_by("a", "c2")
    b = fleet.add_worker("b")
    b.store.latency_s = 1.0  # every store call of b takes a second
    await fleet.clock.advance(12)

    last_expiry_ms = (await fleet.owner_session("c1")).expires_at_ms
    await fleet.crash("a")
    await fleet.clock.run_until(
        lambda: fleet.owner_of("c1") == "b" and fleet.owner_of("c2") == "b", 120
    )

    late_s = (fleet.clock.now_ms() - last_expiry_ms) / 1000
    assert late_s < 5, f"the second lease was taken {late_s:.1f}s after it expired"


async def test_full_scans_run_at_the_reconcile_interval_not_at_every_session_expiry() -> None:
    """GIVEN three live workers streaming, nobody dying WHEN four virtual minutes pass THEN
    each scans for orphans about once a reconcile interval: the sessions watch wakes at every
    other session's expiry (a few times a lease), and a scan there would be a per-connection
    read cost at every heartbeat (issue 12)."""
    fleet = Fleet(rate_per_s=1)
    try:
        for name in ("a", "b", "c"):
            fleet.add_worker(name)
        for i in range(3):
            await fleet.start(f"c{i}")
        await fleet.clock.run_until(lambda: all(fleet.owner_of(f"c{i}") for i in range(3)), 10)
        scans_before = fleet.store.operations.get("iter_orphans", 0)
        watches_before = fleet.store.operations.get("list_sessions", 0)

        minutes = 4
        await fleet.clock.advance(minutes * 60)

        scans = fleet.store.operations["iter_orphans"] - scans_before
        watches = fleet.store.operations["list_sessions"] - watches_before
        per_worker = minutes * 60 / fleet.config.reconcile_interval_s + 1
        assert scans <= 3 * per_worker, scans
        assert watches > 5 * scans, (watches, scans)
    finally:
        await fleet.close()


async def test_the_full_scans_of_workers_started_together_drift_apart_within_the_spread() -> None:
    """GIVEN three workers started at one instant and nothing dying WHEN ten virtual minutes
    pass THEN each worker's pauses between full scans lie within the reconcile interval
    +/- RECONCILE_SPREAD and are not all equal, so the workers' scans no longer fall in the
    same second (at 1,000 workers, one second of every minute held three times a table's
    default read quota: bench/RESULTS.md section 31)."""
    scans: dict[str, list[float]] = {}
    clock = FakeClock()

    class Timed(FaultInjectingStore):
        def __init__(self, caller: str, inner: ConnectionStore) -> None:
            super().__init__(inner, clock)
            self._caller = caller

        def iter_orphans(self, now_ms: int, page_size: int) -> AsyncIterator[Sequence[Connection]]:
            scans.setdefault(self._caller, []).append(clock.monotonic())
            return super().iter_orphans(now_ms, page_size)

    fleet = Fleet(clock=clock, store_layer=Timed)
    try:
        for name in ("a", "b", "c"):
            fleet.add_worker(name)
        await clock.advance(600)
    finally:
        await fleet.close()

    interval = fleet.config.reconcile_interval_s
    pauses = {name: [b - a for a, b in itertools.pairwise(scans[name])] for name in "abc"}
    for name, worker_pauses in pauses.items():
        assert len(worker_pauses) >= 8, (name, worker_pauses)
        assert all(
            interval * (1 - RECONCILE_SPREAD) - 0.5 <= p <= interval * (1 + RECONCILE_SPREAD) + 0.5
            for p in worker_pauses
        ), (name, worker_pauses)
        assert max(worker_pauses) - min(worker_pauses) > 1.0, (name, worker_pauses)
    last = sorted(times[-1] for times in scans.values())
    assert last[-1] - last[0] > 1.0, scans  # started together, apart by now
