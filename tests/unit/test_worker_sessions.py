"""Sessions (application/worker/sessions.py), on virtual time: which connection a handoff
picks, where a takeover resumes when the sink cannot say or cannot be read, the log of a grant
whose answer was lost, and the handed-off window (a shutdown's budget is in
test_worker_sessions_lifecycle.py). Found unasserted by the mutation run of sessions.py."""

import logging

import pytest

from domain import LeaseTakenOver
from tests.support.fleet import Fleet


async def test_a_handoff_moves_a_streaming_connection_before_one_still_reconnecting(
    fleet: Fleet,
) -> None:
    """One reconnecting would only restart its back-off elsewhere; one streaming moves whole."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "streaming")
    url = await fleet.start("reconnecting")
    fleet.upstream.streams[url].fail_opens = 1_000
    await fleet.clock.run_until(lambda: len(a.worker.sessions) == 2, 5)
    await fleet.clock.advance(0.5)

    assert a.worker.sessions.hand_off(1) == ["streaming"]


async def _taken_over_after_a_crash(fleet: Fleet) -> tuple[str, int]:
    """c1 streamed by "a", which crashes: (url, the checkpoint the store holds)."""
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)
    await fleet.crash("a")
    state = await fleet.store.get("c1")
    assert state is not None
    return url, state.checkpoint_seq


async def test_a_takeover_resumes_from_the_checkpoint_when_the_sink_cannot_be_read(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.sessions")
    url, checkpoint = await _taken_over_after_a_crash(fleet)
    assert max(fleet.sink.seqs("c1")) > checkpoint, "the sink holds more than the checkpoint"
    b = fleet.add_worker("b")
    b.sink.outage = True  # the resume point cannot be read...

    await fleet.clock.run_until(lambda: len(b.worker.sessions) == 1, 30)
    b.sink.outage = False  # ...and the stream is stored again from the checkpoint on
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 5)

    assert fleet.upstream.streams[url].opened_from()[-1] == checkpoint + 1
    (record,) = [r for r in caplog.records if r.getMessage().startswith("resume point not read")]
    assert record.getMessage() == (
        "resume point not read, resuming from the checkpoint: injected sink outage"
    )
    (session,) = b.worker.sessions
    assert (record.__dict__["connection_id"], record.__dict__["token"]) == ("c1", session.token)
    history = await fleet.store.history("c1")
    assert any(isinstance(e, LeaseTakenOver) for e in history)


async def test_a_takeover_resumes_from_the_checkpoint_when_the_sink_cannot_say(
    fleet: Fleet,
) -> None:
    """A sink without prev links answers None (application/ports/sink.py): the messages after
    the checkpoint are received again and stored idempotently."""
    url, checkpoint = await _taken_over_after_a_crash(fleet)
    b = fleet.add_worker("b")

    async def cannot_say(connection_id: str, checkpoint_seq: int) -> int | None:
        return None

    b.sink.resume_point = cannot_say  # type: ignore[method-assign]
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 30)

    assert fleet.upstream.streams[url].opened_from()[-1] == checkpoint + 1


async def test_a_grant_whose_answer_was_lost_is_logged_as_such(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.sessions")
    a = fleet.add_worker("a")
    a.store.fail_next("Acquire", applied=True)
    await fleet.start("c1")

    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 30)

    lost = "lease acquired (its answer was lost, the stored item shows it)"
    (record,) = [r for r in caplog.records if r.getMessage() == lost]
    assert record.__dict__["connection_id"] == "c1"


async def test_a_connection_handed_off_that_nobody_takes_is_taken_back_after_a_lease(
    fleet: Fleet,
) -> None:
    """The handed-off window keeps the giver from taking back at once what it handed to a
    worker below its share; when none takes it within a lease, the giver may."""
    a = fleet.add_worker("a")
    for cid in ("c1", "c2"):
        await fleet.start_streamed_by("a", cid)
    await fleet.clock.advance(1)
    lease_s = fleet.config.lease_ms / 1000

    [moving] = a.worker.sessions.hand_off(1)
    await fleet.clock.advance(lease_s - 1)
    assert fleet.owner_of(moving) is None, "taken back within the window"

    await fleet.clock.run_until(lambda: fleet.owner_of(moving) == "a", 2 * lease_s + 60)
