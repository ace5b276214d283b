"""A connection a session hands back while still wanted (its lease stopped being trusted, and
the release went through) is hinted to the fleet at once, so it is taken again within the
hint's latency rather than at someone's next scan (found by tests/chaos)."""

from application.worker.session_keeper import worker_of
from domain import LeaseAcquired, LeaseReleased
from tests.support.fleet import Fleet


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
