"""A dead worker session's item goes away once nothing names it — also when one of its
connections was STOPPED while it was dying (found in review: nobody may acquire a STOPPED
connection, so without a release on the dead owner's behalf its session item and its entry in
the STOP index would stay forever)."""

import attrs

from domain import NO_OWNER, DesiredState
from tests.support.fleet import Fleet


async def test_a_connection_stopped_while_its_owner_died_is_released_and_the_session_forgotten(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.start_streamed_by("a", "c2")
    fleet.add_worker("b")
    await fleet.clock.advance(1)
    dead = a.worker.keeper.session_id

    await fleet.router.stop("c1")  # before a's next STOP check...
    await fleet.crash("a")  # ...a dies: c1 stays owned by a dead session

    await fleet.clock.run_until(lambda: fleet.owner_of("c2") == "b", 30)
    await fleet.clock.advance(fleet.config.lease_ms / 1000 + 2)

    c1 = await fleet.store.get("c1")
    assert c1 is not None
    assert (c1.desired_state, c1.owner) == (DesiredState.STOPPED, NO_OWNER)
    assert await fleet.store.stop_requested(dead) == []
    assert await fleet.store.get_session(dead) is None, "the dead session was forgotten"
    assert fleet.owner_of("c1") is None


async def test_a_dead_session_that_still_owns_a_wanted_connection_is_kept(fleet: Fleet) -> None:
    """No worker has room: the orphan stays owned by the dead session, which must stay findable."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    fleet.add_worker("b", attrs.evolve(fleet.config, max_connections=1))
    await fleet.start_streamed_by("b", "c2")
    dead = a.worker.keeper.session_id

    await fleet.crash("a")
    await fleet.clock.advance(fleet.config.lease_ms / 1000 + 3)

    assert (await fleet.store.get("c1")).owner == dead  # type: ignore[union-attr]
    assert await fleet.store.get_session(dead) is not None
