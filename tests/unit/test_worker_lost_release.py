"""A release whose answer is lost (the write landed): the retry finds the connection no longer
this session's (LeaseLost), and the connection must still be hinted, or it waits for
somebody's scan with no owner (the soak: a balancing handoff's lost release left c09
unstreamed for 15 s at half timings; at the defaults a scan can be a minute away)."""

from tests.support.fleet import Fleet


async def test_a_handoff_whose_release_answer_was_lost_is_still_hinted(fleet: Fleet) -> None:
    fleet.add_worker("a")
    fleet.add_worker("b")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)  # both sessions seen by each other
    a = fleet.members["a"]
    a.store.fail_next("Release", applied=True)  # released, answer lost: the retry is refused

    assert a.worker.sessions.hand_off(1) == ["c1"]
    took = await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 60)

    assert took <= 1.0, took
    assert a.store.injected == 1
