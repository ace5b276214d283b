"""Placement on virtual time: a dead worker's connections spread over the survivors in one
move, each survivor taking its part (never more while others have room), and a part a
survivor cannot take is open to all after the placement grace, never left unowned."""

from application.worker.balance import PLACEMENT_GRACE_BEATS
from domain import LeaseAcquired, LeaseTakenOver
from tests.support.fleet import Fleet


async def _three_balanced(fleet: Fleet, count: int = 30) -> list[str]:
    for name in ("w1", "w2", "w3"):
        fleet.add_worker(name)
    ids = [f"c{i:02}" for i in range(count)]
    for cid in ids:
        await fleet.start(cid)
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in ids), 10)
    await fleet.clock.run_until(
        lambda: all(len(fleet.streamed_by(n)) == count // 3 for n in ("w1", "w2", "w3")), 60
    )
    return ids


async def _moves_since(fleet: Fleet, cid: str, since_ms: int) -> int:
    return sum(
        1
        for e in await fleet.store.history(cid)
        if isinstance(e, LeaseAcquired | LeaseTakenOver) and e.at_ms >= since_ms
    )


async def test_a_dead_workers_connections_move_once_each_survivor_taking_its_part(
    fleet: Fleet,
) -> None:
    await _three_balanced(fleet)
    orphans = fleet.streamed_by("w1")
    crashed_at = fleet.clock.now_ms()

    await fleet.crash("w1")
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in orphans), 30)
    await fleet.clock.advance(30)  # long enough for balancing to move anything it would

    moves = {cid: await _moves_since(fleet, cid, crashed_at) for cid in orphans}
    assert set(moves.values()) == {1}, moves  # before: one survivor took all, then gave half
    split = [len(fleet.streamed_by(n)) for n in ("w2", "w3")]
    assert all(abs(held - 15) <= 1 for held in split), split  # within one of the fair share


async def test_a_part_a_survivor_cannot_take_is_open_to_all_after_the_grace(
    fleet: Fleet,
) -> None:
    await _three_balanced(fleet)
    orphans = fleet.streamed_by("w1")
    # w2's takes fail for its next few scans (an unreachable store, a slow one): its part
    # must not wait for it.
    fleet.members["w2"].store.fail_next("Acquire", 15)

    await fleet.crash("w1")
    took = await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in orphans), 60)

    cfg = fleet.config
    bound_s = cfg.lease_ms / 1000 + (PLACEMENT_GRACE_BEATS + 2) * cfg.heartbeat_interval_s
    assert took <= bound_s, (took, bound_s)
    assert {fleet.owner_of(c) for c in orphans} == {"w3"}  # w2's part too, past the grace
