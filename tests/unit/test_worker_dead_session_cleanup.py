"""A dead worker session's item goes away once nothing names it — also when one of its
connections was STOPPED while it was dying (found in review: nobody may acquire a STOPPED
connection, so without a release on the dead owner's behalf its session item and its entry in
the STOP index would stay forever)."""

import attrs

from application.worker.loops import FORGET_GRACE_MS, RECONCILE_SPREAD
from domain import NO_OWNER, DesiredState, SessionEnded, SessionExpired, SessionOpened
from domain.balance import tended_by
from tests.support.fleet import Fleet


def longest_interval_s(fleet: Fleet) -> float:
    """The longest pause between two full scans (each is drawn within the spread)."""
    return fleet.config.reconcile_interval_s * (1 + RECONCILE_SPREAD)


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
    assert c1.owner == NO_OWNER, "released on the dead owner's behalf at once"
    assert await fleet.store.get_session(dead) is not None, "kept for the index's lag"
    await fleet.clock.advance(FORGET_GRACE_MS / 1000 + longest_interval_s(fleet))

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
    await fleet.clock.advance(FORGET_GRACE_MS / 1000 + longest_interval_s(fleet))

    assert (await fleet.store.get("c1")).owner == dead  # type: ignore[union-attr]
    assert await fleet.store.get_session(dead) is not None


async def test_a_crashed_sessions_expiry_is_recorded_once_by_a_survivor_before_it_is_forgotten(
    fleet: Fleet,
) -> None:
    """GIVEN three workers WHEN one crashes THEN one survivor (the one that tends the dead
    session) records SessionExpired, its own session as the finder, right after the takeover
    scan, and the record outlives the forgotten item; a session that ended on purpose gets no
    expiry."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    b, c = fleet.add_worker("b"), fleet.add_worker("c")
    await fleet.clock.advance(1)
    dead = a.worker.keeper.session_id

    await fleet.crash("a")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") in ("b", "c"), 30)
    await fleet.clock.advance(1)

    opened, expired = await fleet.store.session_history(dead)
    assert isinstance(opened, SessionOpened)
    assert isinstance(expired, SessionExpired)
    # The one survivor that asks: the one that tends it, as both read the listing.
    live = [b.worker.keeper.session_id, c.worker.keeper.session_id]
    assert expired.found_by == tended_by([dead], live)[dead]
    session = await fleet.store.get_session(dead)
    assert session is not None
    assert expired.expired_at_ms == session.expires_at_ms < expired.at_ms
    ended = b.worker.keeper.session_id
    await fleet.shutdown("b")
    await fleet.clock.advance(FORGET_GRACE_MS / 1000 + longest_interval_s(fleet))

    assert await fleet.store.get_session(dead) is None, "forgotten, its log kept"
    assert [type(e) for e in await fleet.store.session_history(dead)] == [
        SessionOpened,
        SessionExpired,
    ]
    assert [type(e) for e in await fleet.store.session_history(ended)] == [
        SessionOpened,
        SessionEnded,
    ]
