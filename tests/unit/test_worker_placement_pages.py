"""Placement when the dead workers' connections fill many pages of the orphan scan (an AZ
loss in a large fleet): each survivor takes its part of all of them within the placement
grace, and the survivors seldom try the same orphan."""

import attrs
import pytest

from application.config import WorkerConfig
from application.ports.metrics import ACQUISITION_CONFLICTS
from application.worker.balance import PLACEMENT_GRACE_BEATS
from domain import LeaseAcquired, LeaseTakenOver
from tests.support.fleet import DEFAULT_CONFIG, Fleet

WORKERS = [f"w{i}" for i in range(1, 7)]
EACH = 10
DEAD = WORKERS[:2]
SURVIVORS = WORKERS[2:]


@pytest.fixture
def fleet_config() -> WorkerConfig:
    # Pages of 3: the 20 orphans of two dead workers span 7 pages. Little jitter: the
    # survivors scan nearly at once, as many do in a large fleet.
    # By count: the parts asserted are counts (15 each); by load each survivor's part is
    # its share of what the orphans cost, a connection either way (the domain's by-load
    # parts: tests/unit/test_domain_balance_load.py).
    return attrs.evolve(
        DEFAULT_CONFIG, reconcile_page_size=3, reconcile_jitter_s=0.02, balance_by="count"
    )


async def _balanced(fleet: Fleet) -> list[str]:
    for name in WORKERS:
        fleet.add_worker(name)
    ids = [f"c{i:02}" for i in range(EACH * len(WORKERS))]
    for cid in ids:
        await fleet.start(cid)
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in ids), 10)
    await fleet.clock.run_until(
        lambda: all(len(fleet.streamed_by(n)) == EACH for n in WORKERS), 120
    )
    await fleet.clock.advance(5)  # settled: every session has reported what it holds
    return ids


def _conflicts(fleet: Fleet) -> float:
    return sum(fleet.members[n].metrics.counters[ACQUISITION_CONFLICTS] for n in SURVIVORS)


async def test_survivors_take_their_parts_of_every_page_before_the_grace_ends(
    fleet: Fleet,
) -> None:
    await _balanced(fleet)
    orphans = [cid for name in DEAD for cid in fleet.streamed_by(name)]
    conflicts_before = _conflicts(fleet)
    crashed_at = fleet.clock.now_ms()
    dead_sessions = [await fleet.owner_session(fleet.streamed_by(name)[0]) for name in DEAD]
    last_expiry_ms = max(session.expires_at_ms for session in dead_sessions)

    for name in DEAD:
        await fleet.crash(name)
    # Until the grace after the dead sessions expire: only placement has taken them by then.
    cfg = fleet.config
    grace_ms = PLACEMENT_GRACE_BEATS * cfg.heartbeat_interval_s * 1000
    await fleet.clock.advance((last_expiry_ms + grace_ms - fleet.clock.now_ms()) / 1000 - 0.01)

    placed = [c for c in orphans if fleet.owner_of(c)]
    assert len(placed) == len(orphans), f"{len(orphans) - len(placed)} not placed in the grace"
    # Each at its target (domain/balance.py takeover_room): 15.
    split = [len(fleet.streamed_by(n)) for n in SURVIVORS]
    assert split == [15] * len(SURVIVORS), split
    moves = [
        sum(
            1
            for e in await fleet.store.history(cid)
            if isinstance(e, LeaseAcquired | LeaseTakenOver) and e.at_ms >= crashed_at
        )
        for cid in orphans
    ]
    assert set(moves) == {1}, moves
    # Every survivor read the same sessions: they try different orphans first.
    assert _conflicts(fleet) - conflicts_before <= 2, _conflicts(fleet) - conflicts_before
