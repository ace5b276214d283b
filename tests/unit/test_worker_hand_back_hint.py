"""A connection a session hands back while still wanted (its lease stopped being trusted, and
the release went through) is hinted to the fleet at once, so it is taken again within the
hint's latency rather than at someone's next scan (found by tests/chaos). A shutting-down
worker's hints reach a survivor even if their first send is caught by a dead worker's poll."""

from application.hints import REPEAT_S
from application.worker.loops import _declined_pause
from application.worker.session_keeper import worker_of
from domain import LeaseAcquired, LeaseReleased
from tests.support.fleet import Fleet
from tests.support.queues import HintRounds


async def test_a_self_fenced_session_that_releases_is_taken_again_at_once(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    fleet.add_worker("b")
    await fleet.clock.advance(3)

    a.store.fail_next("RenewSession", 1_000)  # renewals fail: "a" stops trusting its session

    for _ in range(6_000):  # up to a minute of virtual time
        await fleet.clock.advance(0.01)
        events = await fleet.store.history("c1")
        if any(isinstance(e, LeaseAcquired) and e.token == 2 for e in events):
            break
    history = await fleet.store.history("c1")
    released = next(e for e in history if isinstance(e, LeaseReleased) and e.token == 1)
    acquired = next(e for e in history if isinstance(e, LeaseAcquired) and e.token == 2)
    gap_s = (acquired.at_ms - released.at_ms) / 1000
    assert worker_of(released.owner) == "a"
    assert gap_s < 1.0, f"taken again {gap_s:.1f}s after the release"


async def test_a_handoff_hint_lost_to_a_dead_workers_poll_reaches_a_survivor_in_its_second_round(
    fleet: Fleet,
) -> None:
    """The AWS fleet bench: a SIGKILLed worker's long poll, still open on the queue's server,
    caught the first batch of a later handoff's hints; its connections waited for the queue's
    copy (a second, and on moto up to a second more) or a scan. The shutting-down worker's own
    second round must reach the survivor first (the queue's copies are dropped here)."""
    a = fleet.add_worker("a", queue=HintRounds(fleet.queue, first_lost=1, copies=False))
    await fleet.start_streamed_by("a", "c1")
    b = fleet.add_worker("b")
    await fleet.clock.advance(2)
    began = fleet.clock.monotonic()

    a.worker.request_shutdown()
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 10, step_s=0.01)

    took_s = fleet.clock.monotonic() - began
    assert took_s < REPEAT_S, f"taken {took_s:.2f}s after the shutdown began"
    assert not b.task.done()


async def test_a_worker_without_a_trusted_session_looks_again_soon_not_after_a_capacity_pause(
    fleet: Fleet,
) -> None:
    """The hint loop paused a whole capacity pause (5 s; 2.5 s at the chaos suite's timings)
    whenever it found no room, and a worker without a trusted session has none: a worker back
    from a freeze opened a new session 33 ms after fencing its old one, and the balancing
    handoffs meant for it (it held nothing) waited out the pause, 1.8 s, which the soak counted
    as coverage lost. Untrusted is not full: the loop looks again every quarter heartbeat, so a
    new session takes its hints within one."""
    a = fleet.add_worker("a")
    await fleet.clock.advance(2)
    cfg = fleet.config
    assert _declined_pause(cfg, a.worker.sessions) < cfg.capacity_pause_s  # room, trusted

    a.store.outage = True  # renewals fail until trust runs out; a new session is refused too
    await fleet.clock.run_until(lambda: not a.worker.keeper.trusted, 30)

    assert a.worker.sessions.full  # no room at all while untrusted
    assert _declined_pause(cfg, a.worker.sessions) <= cfg.heartbeat_interval_s / 4
