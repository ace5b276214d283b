"""A lease grant whose answer is lost (the store applied it, the worker heard StoreUnavailable)
is recognised from the stored item, so the connection is streamed at once instead of sitting
leased to nobody until the lease runs out (found by tests/chaos)."""

import logging

import pytest

from application.errors import StoreUnavailable
from application.worker.session_keeper import worker_of
from tests.support.fleet import Fleet


async def test_a_grant_whose_answer_was_lost_is_streamed_at_once_under_that_token(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    a.store.fail_next("Acquire", applied=True)
    await fleet.start("c1")

    waited = await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 30)

    assert waited < fleet.config.lease_ms / 1000, "no lease-long gap"
    state = await fleet.store.get("c1")
    assert state is not None
    assert (worker_of(state.owner), state.token) == ("a", 1)
    assert a.store.injected == 1


async def test_an_acquire_that_failed_before_landing_is_not_mistaken_for_a_grant(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    a.store.fail_next("Acquire")  # refused: nothing written
    await fleet.start("c1")

    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 120)

    state = await fleet.store.get("c1")
    assert state is not None
    assert state.token == 1, "the refused call granted nothing; a later attempt took token 1"


async def test_an_old_lease_of_ours_still_running_out_is_not_taken_for_a_new_grant(
    fleet: Fleet,
) -> None:
    """GIVEN a worker that fenced itself during a store outage (its hand-back failed, so the
    item still names its old session) and opened a new session, WHEN its next acquire fails
    without landing, THEN reading the item back does not adopt that old lease: it belongs to
    a session this worker no longer trusts."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    a.store.outage = True
    await fleet.clock.run_until(lambda: "c1" not in a.worker.sessions, 30)
    a.store.outage = False
    # A new session (a new id for every attempt: one whose answer was lost may have landed).
    await fleet.clock.run_until(lambda: a.worker.keeper.session_id not in ("", "a#1"), 30)
    state = await fleet.store.get("c1")
    assert state is not None
    assert state.owner == "a#1", "still named as the owner by the fenced session"

    a.store.fail_next("Acquire")
    with pytest.raises(StoreUnavailable):
        await a.worker.sessions.take_each([("c1", False)])

    assert "c1" not in a.worker.sessions


async def test_a_takeover_whose_answer_was_lost_resumes_from_what_the_sink_stored(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """GIVEN a worker that crashed long after its last recorded checkpoint WHEN another takes
    the connection over and the acquire's answer is lost (it landed; only the stored item
    shows the grant, not whether it was a takeover) THEN it resumes after the last message
    stored, as after a takeover: resuming from the stale checkpoint would fetch and store
    again what the dead owner stored (or log a false gap)."""
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(5)
    await fleet.crash("a")
    last = max(fleet.sink.seqs("c1"))
    recorded = await fleet.store.get("c1")
    assert recorded is not None
    assert recorded.checkpoint_seq < last - 10

    b = fleet.add_worker("b")
    b.store.fail_next("iter_orphans", 10_000)  # found only through the hint below
    await fleet.clock.advance(fleet.config.lease_ms / 1000 + 1)  # a's session has expired
    b.store.fail_next("Acquire", applied=True)
    with caplog.at_level(logging.INFO, logger="application.worker.sessions"):
        await fleet.queue.send(["c1"])
        await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 10)

    assert "lease acquired (its answer was lost, the stored item shows it)" in caplog.messages
    state = await fleet.store.get("c1")
    assert state is not None
    assert (worker_of(state.owner), state.token) == ("b", 2), "the lost answer's grant"
    assert fleet.upstream.stream(url).opened_from()[-1] == last + 1
    assert fleet.sink.rewrites == 0, "nothing the dead owner stored was stored again"
