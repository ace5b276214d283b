"""A fleet of three workers on virtual time through pickup, crash, handoff and STOP."""

from application.worker.session_keeper import worker_of
from domain import DesiredState, LeaseTakenOver
from tests.support.fleet import Fleet


async def test_start_is_picked_up_and_streamed_within_a_second(fleet: Fleet) -> None:
    for name in ("w1", "w2", "w3"):
        fleet.add_worker(name)
    url = await fleet.start("meeting-1")

    took = await fleet.clock.run_until(lambda: fleet.owner_of("meeting-1") is not None, 5)

    assert took < 1.0
    await fleet.clock.advance(3)
    assert len(fleet.sink.seqs("meeting-1")) >= 20
    fleet.assert_sink_complete("meeting-1", url, upto=20)


async def test_crashed_worker_connections_are_taken_over_from_checkpoint_without_gap(
    fleet: Fleet,
) -> None:
    for name in ("w1", "w2", "w3"):
        fleet.add_worker(name)
    urls = {f"c{i}": await fleet.start(f"c{i}") for i in range(9)}
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in urls), 5)
    await fleet.clock.advance(7)
    victim = max(fleet.members, key=lambda n: len(fleet.streamed_by(n)))
    orphans = fleet.streamed_by(victim)
    assert orphans

    await fleet.crash(victim)
    took = await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in orphans), 120)

    # Bounded by the lease plus reconciliation that wakes when leases expire (plus jitter),
    # not by lease + a 60 s reconcile interval as in the article.
    cfg = fleet.config
    assert took <= cfg.lease_ms / 1000 + cfg.heartbeat_interval_s
    await fleet.clock.advance(5)
    for cid in orphans:
        taken_over = [e for e in await fleet.store.history(cid) if isinstance(e, LeaseTakenOver)]
        assert [worker_of(e.previous_owner) for e in taken_over] == [victim]
        resumed_from = fleet.upstream.streams[urls[cid]].log[-1][2]
        state = await fleet.store.get(cid)
        assert state is not None
        assert resumed_from >= 2, "resumed from a checkpoint, not from the start"
        fleet.assert_sink_complete(cid, urls[cid], upto=state.checkpoint_seq)
    for cid, url in urls.items():
        state = await fleet.store.get(cid)
        assert state is not None
        fleet.assert_sink_complete(cid, url, upto=state.checkpoint_seq)


async def test_graceful_shutdown_hands_every_connection_over_within_a_second(
    fleet: Fleet,
) -> None:
    for name in ("w1", "w2", "w3"):
        fleet.add_worker(name)
    urls = {f"c{i}": await fleet.start(f"c{i}") for i in range(9)}
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in urls), 5)
    await fleet.clock.advance(6)
    leaving = max(fleet.members, key=lambda n: len(fleet.streamed_by(n)))
    moving = fleet.streamed_by(leaving)

    fleet.members[leaving].worker.request_shutdown()
    took = await fleet.clock.run_until(
        lambda: all(fleet.owner_of(c) not in (None, leaving) for c in moving), 10
    )

    assert took <= 1.0
    await fleet.clock.run_until(fleet.members[leaving].task.done, 30)
    await fleet.clock.advance(3)
    for cid in moving:
        state = await fleet.store.get(cid)
        assert state is not None
        fleet.assert_sink_complete(cid, urls[cid], upto=state.checkpoint_seq)
        # ~6 s at 10 msg/s when it moved (less a message or two if balancing moved it before:
        # the nine STARTs land on whoever polls first, then are evened out), nothing lost.
        assert state.checkpoint_seq >= 55


async def test_stop_closes_the_connection_within_one_desired_state_interval(
    fleet: Fleet,
) -> None:
    fleet.add_worker("w1")
    await fleet.start("c1")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") is not None, 5)

    await fleet.router.stop("c1")
    took = await fleet.clock.run_until(lambda: fleet.owner_of("c1") is None, 30)

    assert took <= fleet.config.desired_state_interval_s + 0.5
    state = await fleet.store.get("c1")
    assert state is not None
    assert state.desired_state is DesiredState.STOPPED
    assert state.owner == ""
    await fleet.clock.advance(fleet.config.reconcile_interval_s)
    assert fleet.owner_of("c1") is None, "a STOPPED connection stays closed"
