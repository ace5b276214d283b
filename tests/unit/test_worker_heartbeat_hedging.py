"""One slow heartbeat must not fence a worker whose next heartbeats are answered (issue 12:
every connection hangs on one session, so a single request the store answers late would
otherwise close them all; found by tests/chaos on DynamoDB Local)."""

from application.ports.metrics import SELF_FENCES
from tests.support.fleet import Fleet


async def test_a_renew_stuck_past_the_trust_window_does_not_fence_while_later_ones_succeed(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    first_session = a.worker.keeper.session_id
    trusted_s = fleet.config.trusted_s

    a.store.stall_next("RenewSession", 3 * trusted_s)  # the next heartbeat hangs that long
    await fleet.clock.advance(4 * trusted_s)

    assert a.store.injected == 1, "the stalled renew was made"
    assert a.metrics.counters[SELF_FENCES] == 0
    assert a.worker.keeper.session_id == first_session
    assert fleet.owner_of("c1") == "a"
    opens = [kind for _, kind, _ in fleet.upstream.stream(url).log if kind == "open"]
    assert opens == ["open"], "the subscription was never closed and reopened"
