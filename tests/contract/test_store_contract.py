"""The ConnectionStore contract: one suite, run unchanged against every store (see conftest.py).

The reference is the domain (`decide`, `decide_session`); the in-memory store applies it by
construction, so every assertion here is what the domain says, and the differential test
compares any other store with the in-memory one over a long random command sequence. Races are
judged against the serial orders run on the reference.

Time is the caller's: every call takes `now`. Sessions are worker sessions ("s1", "s2"…), each
live until `expires_at_ms` inclusive.
"""

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence

import pytest

from adapters.memory.store import InMemoryConnectionStore
from application.ports import ConnectionStore
from domain import (
    NO_OWNER,
    Checkpoint,
    CheckpointRegressed,
    Connection,
    ConnectionConflict,
    ConnectionNotFound,
    ConnectionRestarted,
    ConnectionStarted,
    DesiredState,
    DomainError,
    EndSession,
    InvalidCommand,
    LeaseAcquired,
    LeaseLost,
    LeaseReleased,
    LeaseTakenOver,
    OpenSession,
    RenewSession,
    SessionEnded,
    SessionExpired,
    SessionOpened,
    StopReason,
    StopRequested,
    StreamEnded,
    UpstreamFailed,
    WorkerSession,
)

T = 1_700_000_000_000  # "now" in epoch ms; the stores take time from the caller
LEASE = 20_000  # a session's lease
URL = "wss://upstream.example/stream/1"
CAPACITY = 100


async def session(
    store: ConnectionStore, sid: str = "s1", now: int = T, lease: int = LEASE
) -> WorkerSession:
    return await store.open_session(sid, lease, CAPACITY, now)


async def started(store: ConnectionStore, cid: str = "c1", now: int = T) -> Connection:
    return (await store.start(cid, URL, now)).connection


async def leased(
    store: ConnectionStore, cid: str = "c1", sid: str = "s1", now: int = T
) -> Connection:
    """`cid` started and acquired by session `sid` (opened at `now` unless it exists)."""
    if await store.get_session(sid) is None:
        await session(store, sid, now)
    await started(store, cid, now)
    conn = await store.try_acquire(cid, sid, now)
    assert conn is not None
    return conn


def _by_id(sessions: Sequence[WorkerSession]) -> list[WorkerSession]:
    return sorted(sessions, key=lambda s: s.session_id)


async def orphan_ids(store: ConnectionStore, now: int, page_size: int = 3) -> set[str]:
    return {c.connection_id async for page in store.iter_orphans(now, page_size) for c in page}


# --- start / stop ------------------------------------------------------------------------------


async def test_start_creates_a_started_connection_nobody_holds(store: ConnectionStore) -> None:
    result = await store.start("c1", URL, T)

    assert result.changed
    assert result.connection == Connection(
        connection_id="c1",
        version=1,
        desired_state=DesiredState.STARTED,
        ws_url=URL,
        updated_at_ms=T,
    )
    assert await store.get("c1") == result.connection


async def test_repeated_start_changes_nothing_not_owner_token_or_checkpoint(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    assert await store.checkpoint("c1", "s1", conn.token, 42, T + 1)
    checkpointed = await store.get("c1")

    again = await store.start("c1", URL, T + 2)

    assert not again.changed
    assert again.connection == checkpointed
    assert await store.get("c1") == checkpointed


async def test_start_with_another_url_while_started_is_a_conflict(store: ConnectionStore) -> None:
    before = await started(store)

    with pytest.raises(ConnectionConflict):
        await store.start("c1", "wss://elsewhere.example/x", T + 1)
    assert await store.get("c1") == before


@pytest.mark.parametrize(
    ("cid", "url"),
    [("", URL), ("bad id", URL), ("x" * 129, URL), ("c1", "https://not-a-websocket/"), ("c1", "")],
)
async def test_start_refuses_invalid_ids_and_urls(
    store: ConnectionStore, cid: str, url: str
) -> None:
    with pytest.raises(InvalidCommand):
        await store.start(cid, url, T)
    assert await store.list_connections() == []


async def test_stop_of_unknown_connection_raises_not_found(store: ConnectionStore) -> None:
    with pytest.raises(ConnectionNotFound):
        await store.stop("never-started", T)


async def test_stop_is_idempotent_and_leaves_the_lease_to_its_owner(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)

    first = await store.stop("c1", T + 1)
    again = await store.stop("c1", T + 2)

    stopped = first.connection
    assert (first.changed, again.changed) == (True, False)
    assert stopped.desired_state is DesiredState.STOPPED
    assert stopped.stop_reason is StopReason.REQUESTED
    assert (stopped.owner, stopped.token) == ("s1", conn.token)  # the owner sees it and releases
    assert again.connection == stopped
    assert await store.stop_requested("s1") == ["c1"]
    assert [type(e) for e in await store.history("c1")][-1] is StopRequested


async def test_of_racing_stops_exactly_one_reports_the_change(store: ConnectionStore) -> None:
    await started(store)

    results = await asyncio.gather(*(store.stop("c1", T + 1) for _ in range(8)))

    assert sum(r.changed for r in results) == 1
    assert [type(e) for e in await store.history("c1")].count(StopRequested) == 1


async def test_stopped_connection_is_never_acquired(store: ConnectionStore) -> None:
    await started(store)
    await store.stop("c1", T)
    await session(store, "s1", T)
    await session(store, "s2", T + 10 * LEASE)

    assert await store.try_acquire("c1", "s1", T + 1) is None
    assert await store.try_acquire("c1", "s2", T + 10 * LEASE) is None
    assert (await store.get("c1")).version == 2  # type: ignore[union-attr]  # nothing written
    assert await orphan_ids(store, T + 10 * LEASE) == set()


async def test_start_after_stop_restarts_keeping_checkpoint_and_token(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    await store.release("c1", "s1", conn.token, 17, T + 1)
    await store.stop("c1", T + 2)

    restarted = await store.start("c1", "wss://moved.example/s", T + 3)

    assert restarted.changed
    assert restarted.connection.desired_state is DesiredState.STARTED
    assert restarted.connection.ws_url == "wss://moved.example/s"
    assert restarted.connection.stop_reason is None
    assert restarted.connection.checkpoint_seq == 17
    assert restarted.connection.token == conn.token
    await session(store, "s2", T + 4)
    again = await store.try_acquire("c1", "s2", T + 4)
    assert again is not None
    assert (again.token, again.resume_from_seq) == (conn.token + 1, 18)
    assert isinstance((await store.history("c1"))[-2], ConnectionRestarted)


async def test_a_checkpoint_answers_with_the_connection_and_whether_it_moved(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)

    moved = await store.execute(Checkpoint("c1", "s1", conn.token, 5), T + 1)
    same = await store.execute(Checkpoint("c1", "s1", conn.token, 5), T + 2)

    assert moved.changed
    assert moved.connection == await store.get("c1")
    assert moved.connection.checkpoint_seq == 5
    assert (same.connection, same.changed) == (moved.connection, False)


async def test_get_of_unknown_connection_is_none(store: ConnectionStore) -> None:
    assert await store.get("nobody") is None
    assert await store.get("not a valid id") is None


async def test_a_malformed_session_id_names_nothing_and_forgets_nothing(
    store: ConnectionStore,
) -> None:
    # What a worker or the router may be asked about: a reply, never a key built from it.
    for bad in ("", "tab\there", "x" * 257):
        await names_nothing(store, bad)


async def names_nothing(store: ConnectionStore, bad: str) -> None:
    assert await store.get_session(bad) is None
    assert list(await store.owned_by(bad)) == []
    assert list(await store.stop_requested(bad)) == []
    assert list(await store.session_history(bad)) == []
    assert await store.forget_session(bad, T) is False


# --- worker sessions ---------------------------------------------------------------------------


async def test_open_session_is_live_for_its_lease_and_logged(store: ConnectionStore) -> None:
    opened = await store.open_session("s1", LEASE, 7, T)

    assert opened == WorkerSession(
        session_id="s1",
        version=1,
        expires_at_ms=T + LEASE,
        capacity=7,
        opened_at_ms=T,
        updated_at_ms=T,
    )
    assert opened.is_live(T + LEASE)  # inclusive
    assert await store.get_session("s1") == opened
    assert await store.list_sessions() == [opened]
    [logged] = await store.session_history("s1")
    assert isinstance(logged, SessionOpened)
    assert (logged.version, logged.at_ms, logged.expires_at_ms) == (1, T, T + LEASE)


@pytest.mark.parametrize(
    ("sid", "lease", "capacity"),
    [("", LEASE, 1), ("bad\nid", LEASE, 1), ("s" * 257, LEASE, 1), ("s1", 0, 1), ("s1", LEASE, -1)],
)
async def test_open_session_refuses_invalid_ids_leases_and_capacities(
    store: ConnectionStore, sid: str, lease: int, capacity: int
) -> None:
    with pytest.raises(InvalidCommand):
        await store.open_session(sid, lease, capacity, T)
    assert await store.list_sessions() == []


async def test_a_session_id_is_opened_once(store: ConnectionStore) -> None:
    first = await session(store)
    await store.end_session("s1", "bye", T + 1)

    with pytest.raises(InvalidCommand):
        await session(store, now=T + 2)
    ended = await store.get_session("s1")
    assert ended is not None
    assert (ended.version, ended.ended_reason) == (first.version + 1, "bye")


async def test_renew_session_extends_it_never_shortens_it_and_records_the_load(
    store: ConnectionStore,
) -> None:
    await session(store)

    longer = await store.renew_session("s1", 3 * LEASE, 5, 10, T + 10)
    shorter = await store.renew_session("s1", LEASE, 6, 10, T + 20)

    assert longer is not None
    assert shorter is not None
    assert longer.expires_at_ms == T + 10 + 3 * LEASE
    assert shorter.expires_at_ms == T + 10 + 3 * LEASE  # kept, not shortened
    assert (shorter.held, shorter.capacity, shorter.version) == (6, 10, 3)
    assert shorter.updated_at_ms == T + 20
    assert await store.get_session("s1") == shorter
    assert [type(e) for e in await store.session_history("s1")] == [SessionOpened]  # not logged


async def test_renew_session_records_the_message_rate_for_balancing_by_load(
    store: ConnectionStore,
) -> None:
    await session(store)

    renewed = await store.renew_session("s1", LEASE, 3, 10, T + 10, rate_milli=152_500)

    assert renewed is not None
    assert renewed.rate_milli == 152_500
    assert await store.get_session("s1") == renewed
    assert [s.rate_milli for s in await store.list_sessions() if s.session_id == "s1"] == [152_500]
    again = await store.renew_session("s1", LEASE, 3, 10, T + 20)
    assert again is not None
    assert again.rate_milli == 0  # each renew reports it afresh


async def test_renew_of_an_expired_ended_or_unknown_session_is_refused(
    store: ConnectionStore,
) -> None:
    expired = await session(store, "expired")
    await session(store, "ended")
    await store.end_session("ended", "bye", T + 1)
    ended = await store.get_session("ended")

    late = T + LEASE + 1  # `expired` died one ms ago
    assert await store.renew_session("expired", LEASE, 0, 1, late) is None
    assert await store.renew_session("ended", LEASE, 0, 1, T + 2) is None
    assert await store.renew_session("unknown", LEASE, 0, 1, T + 2) is None
    assert await store.get_session("expired") == expired  # dead for good, unchanged
    assert await store.get_session("ended") == ended
    assert await store.get_session("unknown") is None
    with pytest.raises(InvalidCommand):
        await store.renew_session("ended", 0, 0, 1, T + 2)  # bad input says so, even here


async def test_end_session_is_idempotent_and_the_first_reason_stands(
    store: ConnectionStore,
) -> None:
    await session(store)

    results = await asyncio.gather(*(store.end_session("s1", f"r{i}", T + 1) for i in range(6)))
    after = await store.end_session("s1", "again", T + 2)

    assert sorted(results) == [False] * 5 + [True]
    assert not after
    ended = await store.get_session("s1")
    assert ended is not None
    assert ended.version == 2
    assert ended.ended_reason in {f"r{i}" for i in range(6)}
    assert not ended.is_live(T + 1)
    history = await store.session_history("s1")
    assert [type(e) for e in history] == [SessionOpened, SessionEnded]
    assert isinstance(history[1], SessionEnded)
    assert history[1].reason == ended.ended_reason
    assert not await store.end_session("unknown", "x", T)
    # Unchanged, the answer is still the session as it stands (SessionResult.session).
    again = await store.execute_session(EndSession("s1", "again"), T + 3)
    assert (again.session, again.changed) == (ended, False)


async def test_an_open_answers_with_the_opened_session(store: ConnectionStore) -> None:
    result = await store.execute_session(OpenSession("s1", LEASE, 7), T)

    assert result.changed
    assert result.session == await store.get_session("s1")


async def test_a_renew_answers_with_the_renewed_session(store: ConnectionStore) -> None:
    await session(store)

    result = await store.execute_session(RenewSession("s1", LEASE, 3, 7), T + 1)

    assert result.changed
    assert result.session == await store.get_session("s1")
    assert result.session is not None
    assert (result.session.held, result.session.expires_at_ms) == (3, T + 1 + LEASE)


async def test_ending_a_session_answers_with_the_ended_session(store: ConnectionStore) -> None:
    await session(store)

    result = await store.execute_session(EndSession("s1", "bye"), T + 1)

    assert result.changed
    assert result.session == await store.get_session("s1")
    assert result.session is not None
    assert result.session.ended_reason == "bye"


async def test_an_expired_session_can_still_be_ended(store: ConnectionStore) -> None:
    await session(store)

    assert await store.end_session("s1", "reaped", T + LEASE + 5)
    ended = await store.get_session("s1")
    assert ended is not None
    assert ended.ended_reason == "reaped"


async def test_an_expiry_found_is_in_the_session_history_once_with_its_finder(
    store: ConnectionStore,
) -> None:
    """What `wsfleet history <session>` shows of a worker that died without ending: when its
    last renew ran out, who found it, and when. Racing finders record it once."""
    await session(store)
    await store.renew_session("s1", LEASE, 2, CAPACITY, T + 1_000)
    expired_at = T + 1_000 + LEASE
    found = expired_at + 300

    results = await asyncio.gather(
        *(store.note_expiry("s1", f"finder{i}", found) for i in range(4))
    )

    assert sorted(results) == [False] * 3 + [True]
    history = await store.session_history("s1")
    assert [type(e) for e in history] == [SessionOpened, SessionExpired]
    expiry = history[1]
    assert isinstance(expiry, SessionExpired)
    assert (expiry.at_ms, expiry.expired_at_ms, expiry.version) == (found, expired_at, 3)
    assert expiry.found_by in {f"finder{i}" for i in range(4)}
    noted = await store.get_session("s1")
    assert noted is not None
    assert noted.expiry_noted
    assert (noted.expires_at_ms, noted.held, noted.ended_reason) == (expired_at, 2, None)
    assert not await store.note_expiry("s1", "late", found + 1)  # the first finder stands
    assert await store.renew_session("s1", LEASE, 0, 1, found + 2) is None  # dead still
    # The record outlives the item: forgetting the session keeps its log.
    assert await store.forget_session("s1", found + 3)
    assert [type(e) for e in await store.session_history("s1")] == [SessionOpened, SessionExpired]
    assert not await store.note_expiry("s1", "later", found + 4)  # forgotten: nothing to note


async def test_an_expiry_is_not_noted_for_a_live_or_an_ended_session(
    store: ConnectionStore,
) -> None:
    live = await session(store, "live")
    await session(store, "ended")
    await store.end_session("ended", "shutdown", T + 1)

    with pytest.raises(InvalidCommand, match="has not expired"):
        await store.note_expiry("live", "s2", T + LEASE)  # its last live instant
    with pytest.raises(InvalidCommand, match="found_by"):
        await store.note_expiry("live", "", T + LEASE + 1)
    assert not await store.note_expiry("ended", "s2", T + LEASE + 1)
    assert not await store.note_expiry("unknown", "s2", T + LEASE + 1)

    assert await store.get_session("live") == live
    assert [type(e) for e in await store.session_history("live")] == [SessionOpened]
    assert [type(e) for e in await store.session_history("ended")] == [SessionOpened, SessionEnded]


async def test_list_sessions_is_every_session_live_or_dead(store: ConnectionStore) -> None:
    for sid in ["sb", "sc", "sa"]:
        await session(store, sid)
    await store.end_session("sc", "bye", T + 1)

    listed = _by_id(await store.list_sessions())  # no order promised

    assert [s.session_id for s in listed] == ["sa", "sb", "sc"]
    assert listed[2] == await store.get_session("sc")


# --- acquire -----------------------------------------------------------------------------------


async def test_acquire_grants_a_lease_with_a_new_token(store: ConnectionStore) -> None:
    await started(store)
    await session(store)

    conn = await store.try_acquire("c1", "s1", T + 5)

    assert conn is not None
    assert (conn.owner, conn.token, conn.version) == ("s1", 1, 2)
    assert conn.resume_from_seq == 1
    assert await store.get("c1") == conn
    acquired = (await store.history("c1"))[-1]
    assert isinstance(acquired, LeaseAcquired)
    assert (acquired.owner, acquired.token, acquired.at_ms) == ("s1", 1, T + 5)


async def test_acquire_lease_answers_with_the_events_it_recorded(store: ConnectionStore) -> None:
    """The worker reads the sink's resume point only after a takeover: the answer must say
    which grant it was, exactly as the log records it."""
    await started(store)
    await session(store, "s1")
    await session(store, "s2")

    first = await store.acquire_lease("c1", "s1", T + 1)
    assert first is not None
    assert first.events == tuple((await store.history("c1"))[-1:])
    assert [type(e) for e in first.events] == [LeaseAcquired]
    assert await store.acquire_lease("c1", "s2", T + 2) is None  # held by a live session

    await store.end_session("s1", "gone", T + 3)
    second = await store.acquire_lease("c1", "s2", T + 4)
    assert second is not None
    assert second.events == tuple((await store.history("c1"))[-1:])
    [taken] = second.events
    assert isinstance(taken, LeaseTakenOver)
    assert (taken.owner, taken.previous_owner, taken.token) == ("s2", "s1", 2)


async def test_concurrent_acquires_of_one_connection_exactly_one_wins(
    store: ConnectionStore,
) -> None:
    await started(store)
    for i in range(20):
        await session(store, f"s{i}")

    results = await asyncio.gather(*(store.try_acquire("c1", f"s{i}", T + 1) for i in range(20)))

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    stored = await store.get("c1")
    assert stored == winners[0]
    assert stored is not None
    assert stored.token == 1
    assert [type(e) for e in await store.history("c1")] == [ConnectionStarted, LeaseAcquired]


async def test_held_lease_is_not_acquired_even_by_its_owner(store: ConnectionStore) -> None:
    conn = await leased(store)
    await session(store, "s2")

    assert await store.try_acquire("c1", "s2", T + LEASE) is None  # the session lives to T+LEASE
    assert await store.try_acquire("c1", "s1", T + 1) is None
    assert await store.get("c1") == conn


async def test_acquire_needs_a_live_acquirer_session(store: ConnectionStore) -> None:
    """GIVEN an orphan WHEN a session that never was, has expired, or has ended asks for it THEN
    it is refused and nothing is written: a dead session must own nothing new."""
    before = await started(store)
    await session(store, "expired")
    await session(store, "ended")
    await store.end_session("ended", "bye", T)

    assert await store.try_acquire("c1", "unknown", T + 1) is None
    assert await store.try_acquire("c1", "ended", T + 1) is None
    assert await store.try_acquire("c1", "expired", T + LEASE + 1) is None
    assert await store.get("c1") == before
    assert [type(e) for e in await store.history("c1")] == [ConnectionStarted]
    assert await store.try_acquire("c1", "expired", T + LEASE) is not None  # live to the end


async def test_acquire_of_unknown_connection_is_none_and_invalid_ids_are_refused(
    store: ConnectionStore,
) -> None:
    await session(store)
    assert await store.try_acquire("nobody", "s1", T) is None
    with pytest.raises(InvalidCommand):
        await store.try_acquire("not valid", "s1", T)
    await started(store)
    with pytest.raises(InvalidCommand):
        await store.try_acquire("c1", "", T)
    assert (await store.get("c1")).version == 1  # type: ignore[union-attr]


async def test_connection_of_an_expired_session_is_taken_over_and_the_log_names_it(
    store: ConnectionStore,
) -> None:
    first = await leased(store)
    assert await store.checkpoint("c1", "s1", first.token, 9, T + 1_000)
    late = T + LEASE + 1
    await session(store, "s2", late)

    taken = await store.try_acquire("c1", "s2", late)

    assert taken is not None
    assert (taken.owner, taken.token, taken.resume_from_seq) == ("s2", 2, 10)
    last = (await store.history("c1"))[-1]
    assert isinstance(last, LeaseTakenOver)
    assert (last.owner, last.token, last.at_ms) == ("s2", 2, late)
    assert (last.previous_owner, last.previous_token) == ("s1", 1)
    assert last.version == taken.version


async def test_connection_of_an_ended_session_is_taken_over_at_once(
    store: ConnectionStore,
) -> None:
    await leased(store)
    await session(store, "s2")
    assert await store.try_acquire("c1", "s2", T + 1) is None  # s1 is live

    assert await store.end_session("s1", "shutdown", T + 2)
    taken = await store.try_acquire("c1", "s2", T + 3)

    assert taken is not None
    assert (taken.owner, taken.token) == ("s2", 2)
    assert isinstance((await store.history("c1"))[-1], LeaseTakenOver)


async def test_a_renewed_session_keeps_its_connections(store: ConnectionStore) -> None:
    conn = await leased(store)
    await session(store, "s2", T + LEASE)
    assert await store.renew_session("s1", LEASE, 1, CAPACITY, T + LEASE - 1) is not None

    assert await store.try_acquire("c1", "s2", T + LEASE + 1) is None
    assert await orphan_ids(store, T + LEASE + 1) == set()
    assert await store.get("c1") == conn


async def test_released_lease_is_acquired_not_taken_over(store: ConnectionStore) -> None:
    conn = await leased(store)
    await store.release("c1", "s1", conn.token, 0, T + 1)
    await session(store, "s2")

    again = await store.try_acquire("c1", "s2", T + 2)

    assert again is not None
    assert again.token == 2
    assert isinstance((await store.history("c1"))[-1], LeaseAcquired)


async def test_the_token_rises_on_every_change_of_owner(store: ConnectionStore) -> None:
    """Acquire, release and re-acquire by the same session, takeover after an end, takeover
    after an expiry: every grant is a new token, never a reused one."""
    await started(store)
    for sid in ("s1", "s2", "s3"):
        await session(store, sid)
    tokens = []
    first = await store.try_acquire("c1", "s1", T + 1)
    assert first is not None
    tokens.append(first.token)
    await store.release("c1", "s1", first.token, 0, T + 2)
    same_session = await store.try_acquire("c1", "s1", T + 3)
    assert same_session is not None
    tokens.append(same_session.token)
    await store.end_session("s1", "bye", T + 4)
    after_end = await store.try_acquire("c1", "s2", T + 5)
    assert after_end is not None
    tokens.append(after_end.token)
    await store.end_session("s2", "bye", T + 6)
    assert await store.renew_session("s3", 3 * LEASE, 0, 1, T + 7) is not None
    after_s2 = await store.try_acquire("c1", "s3", T + 8)
    assert after_s2 is not None
    tokens.append(after_s2.token)
    s3_dead = T + 7 + 3 * LEASE + 1
    await session(store, "s4", s3_dead)
    after_expiry = await store.try_acquire("c1", "s4", s3_dead)
    assert after_expiry is not None
    tokens.append(after_expiry.token)

    assert tokens == [1, 2, 3, 4, 5]
    grants = [e for e in await store.history("c1") if isinstance(e, LeaseAcquired | LeaseTakenOver)]
    assert [(type(e), e.owner, e.token) for e in grants] == [
        (LeaseAcquired, "s1", 1),
        (LeaseAcquired, "s1", 2),
        (LeaseTakenOver, "s2", 3),
        (LeaseTakenOver, "s3", 4),
        (LeaseTakenOver, "s4", 5),
    ]


async def test_racing_takeovers_of_a_dead_sessions_connection_have_exactly_one_winner(
    store: ConnectionStore,
) -> None:
    for i in range(6):
        await leased(store, f"c{i}", "dead")
    late = T + LEASE + 1
    for i in range(8):
        await session(store, f"s{i}", late)

    results = await asyncio.gather(
        *(store.try_acquire(f"c{i}", f"s{j}", late) for i in range(6) for j in range(8))
    )

    for i in range(6):
        wins = [r for r in results[i * 8 : (i + 1) * 8] if r is not None]
        assert len(wins) == 1, f"c{i}: {wins}"
        assert wins[0] == await store.get(f"c{i}")
        assert wins[0].token == 2
        assert [type(e) for e in await store.history(f"c{i}")].count(LeaseTakenOver) == 1


# --- checkpoint, release and fencing ----------------------------------------------------------


async def test_old_owner_is_fenced_off_after_a_takeover(store: ConnectionStore) -> None:
    old = await leased(store)
    later = T + LEASE + 1
    await session(store, "s2", later)
    new = await store.try_acquire("c1", "s2", later)
    assert new is not None

    assert not await store.checkpoint("c1", "s1", old.token, 5, later)
    with pytest.raises(LeaseLost):
        await store.release("c1", "s1", old.token, 0, later)
    with pytest.raises(LeaseLost):
        await store.end_stream("c1", "s1", old.token, 0, later)
    with pytest.raises(LeaseLost):
        await store.report_upstream_failure("c1", "s1", old.token, 0, later + 9, "x", later)
    # The new owner's session with the old token is just as stale.
    assert not await store.checkpoint("c1", "s2", old.token, 5, later)
    with pytest.raises(LeaseLost):
        await store.release("c1", "s2", old.token, 0, later)
    assert await store.get("c1") == new
    assert await store.stop_requested("s1") == []


async def test_a_dead_sessions_owner_may_still_release_and_checkpoint_until_taken_over(
    store: ConnectionStore,
) -> None:
    """Nobody took over yet: what it stored is stored (checkpoint), and a release frees the
    connection sooner. Its session stays dead all the same."""
    conn = await leased(store, "c1")
    other = await leased(store, "c2")
    late = T + LEASE + 1

    assert await store.checkpoint("c1", "s1", conn.token, 8, late)
    released = await store.release("c1", "s1", conn.token, 9, late + 1)
    assert (released.owner, released.checkpoint_seq) == (NO_OWNER, 9)
    await store.end_session("s1", "bye", late + 2)
    ended = await store.end_stream("c2", "s1", other.token, 4, late + 3)
    assert (ended.owner, ended.desired_state) == (NO_OWNER, DesiredState.STOPPED)
    assert await store.renew_session("s1", LEASE, 0, 1, late + 4) is None


async def test_checkpoint_records_progress_and_never_regresses(store: ConnectionStore) -> None:
    conn = await leased(store)  # version 2

    assert await store.checkpoint("c1", "s1", conn.token, 0, T + 1)  # no change, no write
    same = await store.get("c1")
    assert await store.checkpoint("c1", "s1", conn.token, 50, T + 2)
    advanced = await store.get("c1")
    with pytest.raises(CheckpointRegressed):
        await store.checkpoint("c1", "s1", conn.token, 49, T + 3)

    assert same == conn
    assert advanced is not None
    assert (advanced.version, advanced.checkpoint_seq, advanced.updated_at_ms) == (3, 50, T + 2)
    assert await store.get("c1") == advanced
    with pytest.raises(CheckpointRegressed):
        await store.release("c1", "s1", conn.token, 49, T + 4)
    released = await store.release("c1", "s1", conn.token, 60, T + 5)
    assert released.checkpoint_seq == 60
    assert released.version == advanced.version + 2  # Checkpointed, LeaseReleased


async def test_checkpoint_of_an_unknown_connection_or_a_stranger_is_refused(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)

    assert not await store.checkpoint("nobody", "s1", 1, 5, T + 1)
    assert not await store.checkpoint("c1", "s2", conn.token, 5, T + 1)
    assert not await store.checkpoint("c1", "s1", conn.token + 1, 5, T + 1)
    assert await store.get("c1") == conn


async def test_checkpoints_and_session_renewals_are_not_in_the_history(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    for i in range(1, 6):
        assert await store.checkpoint("c1", "s1", conn.token, i, T + i)
        assert await store.renew_session("s1", LEASE, 1, CAPACITY, T + i) is not None
    await store.release("c1", "s1", conn.token, 9, T + 10)

    history = await store.history("c1")

    assert [type(e) for e in history] == [ConnectionStarted, LeaseAcquired, LeaseReleased]
    assert [e.version for e in history] == [1, 2, 9]  # 5 checkpoints, 1 more on release
    assert [type(e) for e in await store.session_history("s1")] == [SessionOpened]


async def test_release_frees_the_connection_for_anyone(store: ConnectionStore) -> None:
    conn = await leased(store)

    released = await store.release("c1", "s1", conn.token, 5, T + 1)

    assert (released.owner, released.token, released.checkpoint_seq) == (NO_OWNER, 1, 5)
    assert [c async for page in store.iter_orphans(T + 2, 10) for c in page] == [released]


async def test_a_retry_after_an_unknown_outcome_is_answered_from_the_stored_state(
    store: ConnectionStore,
) -> None:
    """A call whose outcome was unknown (StoreUnavailable) and is retried finds its own first
    attempt applied: the retry is refused as the domain refuses it, and `get` tells what
    happened. That is what a worker must do after an unknown outcome: read, not assume."""
    await started(store)
    await session(store)
    first = await store.try_acquire("c1", "s1", T + 1)
    assert first is not None

    assert await store.try_acquire("c1", "s1", T + 2) is None  # held, by the caller itself
    assert await store.get("c1") == first
    released = await store.release("c1", "s1", first.token, 3, T + 3)
    with pytest.raises(LeaseLost):
        await store.release("c1", "s1", first.token, 3, T + 4)
    assert await store.get("c1") == released
    assert await store.end_session("s1", "bye", T + 5)
    assert not await store.end_session("s1", "bye", T + 6)
    with pytest.raises(InvalidCommand):
        await store.open_session("s1", LEASE, CAPACITY, T + 7)


# --- upstream failures and back-off ------------------------------------------------------------


async def test_upstream_failures_back_off_acquire_and_progress_clears_them(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    backoff_until = T + 60_000
    for sid in ("s2", "s3"):
        await session(store, sid, backoff_until)

    failed = await store.report_upstream_failure(
        "c1", "s1", conn.token, 0, backoff_until, "refused", T + 1
    )

    assert (failed.failures, failed.not_before_ms, failed.owner) == (1, backoff_until, NO_OWNER)
    assert await store.try_acquire("c1", "s2", backoff_until) is None  # inclusive
    assert [p async for p in store.iter_orphans(backoff_until, 10)] == []
    assert await store.next_available_at(T + LEASE + 1) == backoff_until

    second = await store.try_acquire("c1", "s2", backoff_until + 1)
    assert second is not None
    assert second.failures == 1  # acquiring is not progress
    again = await store.report_upstream_failure(
        "c1", "s2", second.token, 0, backoff_until + 2, "refused", backoff_until + 2
    )
    assert again.failures == 2  # no progress during that lease either

    third = await store.try_acquire("c1", "s3", backoff_until + 3)
    assert third is not None
    assert await store.checkpoint("c1", "s3", third.token, 1, backoff_until + 4)
    progressed = await store.get("c1")
    assert progressed is not None
    assert progressed.failures == 0
    failed_after_progress = await store.report_upstream_failure(
        "c1", "s3", third.token, 2, backoff_until + 9, "dropped", backoff_until + 5
    )
    assert failed_after_progress.failures == 1
    assert failed_after_progress.checkpoint_seq == 2
    log = await store.history("c1")
    assert [type(e) for e in log[-2:]] == [UpstreamFailed, LeaseReleased]
    last_failure = log[-2]
    assert isinstance(last_failure, UpstreamFailed)
    assert (last_failure.reason, last_failure.failures) == ("dropped", 1)


# --- end of stream -----------------------------------------------------------------------------


async def test_end_of_stream_stops_the_connection_and_releases(store: ConnectionStore) -> None:
    conn = await leased(store)
    await session(store, "s2")

    ended = await store.end_stream("c1", "s1", conn.token, 77, T + 1)

    assert ended.desired_state is DesiredState.STOPPED
    assert ended.stop_reason is StopReason.STREAM_ENDED
    assert (ended.owner, ended.checkpoint_seq) == (NO_OWNER, 77)
    assert await store.try_acquire("c1", "s2", T + 2) is None
    assert await store.get("c1") == ended
    assert await store.stop_requested("s1") == []  # nothing left for its owner to do
    types = [type(e) for e in await store.history("c1")]
    assert types[-2:] == [StreamEnded, LeaseReleased]


async def test_end_of_stream_after_a_stop_only_releases(store: ConnectionStore) -> None:
    conn = await leased(store)
    await store.stop("c1", T + 1)

    ended = await store.end_stream("c1", "s1", conn.token, 0, T + 2)

    assert ended.stop_reason is StopReason.REQUESTED
    assert [type(e) for e in await store.history("c1")][-2:] == [StopRequested, LeaseReleased]


# --- a hand-back records the final checkpoint ---------------------------------------------------

# Each hands c1 back for session s1 with its token and a final checkpoint, at `now`.
_HandBack = Callable[[ConnectionStore, int, int, int], Awaitable[Connection]]
_HAND_BACKS: dict[str, _HandBack] = {
    "release": lambda s, token, seq, now: s.release("c1", "s1", token, seq, now),
    "end_stream": lambda s, token, seq, now: s.end_stream("c1", "s1", token, seq, now),
    "report_upstream_failure": lambda s, token, seq, now: s.report_upstream_failure(
        "c1", "s1", token, seq, now + 1, "dropped", now
    ),
}


@pytest.mark.parametrize("recorded", [None, 5], ids=["none-recorded", "5-recorded"])
@pytest.mark.parametrize("hand_back", list(_HAND_BACKS))
async def test_every_hand_back_stores_its_final_checkpoint_for_the_next_owner(
    store: ConnectionStore, hand_back: str, recorded: int | None
) -> None:
    """The checkpoint a hand-back carries is what is stored, and what the next owner is given,
    whatever was recorded before (nothing since the acquire, or an hourly record behind it):
    the next owner resumes after it."""
    conn = await leased(store)
    if recorded is not None:
        assert await store.checkpoint("c1", "s1", conn.token, recorded, T + 1)

    returned = await _HAND_BACKS[hand_back](store, conn.token, 9, T + 2)

    assert (returned.owner, returned.checkpoint_seq) == (NO_OWNER, 9)
    assert await store.get("c1") == returned
    later = T + 10
    if hand_back == "end_stream":
        await store.start("c1", URL, later)  # wanted again: it keeps its checkpoint
    await session(store, "s2", later)
    next_owner = await store.try_acquire("c1", "s2", later)
    assert next_owner is not None
    assert (next_owner.owner, next_owner.checkpoint_seq) == ("s2", 9)


# --- reconciliation queries --------------------------------------------------------------------


async def test_orphans_of_both_kinds_are_paged_until_all_are_returned(
    store: ConnectionStore,
) -> None:
    """GIVEN 60 unowned orphans (several in most index shards) and 25 connections owned by a
    session that expired, plus held and stopped connections WHEN listed in small pages (each
    shard and each dead owner needs several) and in large ones (one page spans shards) THEN
    each orphan comes exactly once, as stored, and no page is too big."""
    unowned = [f"orphan-{i:03d}" for i in range(60)]
    for cid in unowned:
        await started(store, cid)
    dead = [f"dead-{i:03d}" for i in range(25)]
    for cid in dead:
        await leased(store, cid, "dying", T - LEASE)
    await leased(store, "held", "live")
    await started(store, "stopped")
    await store.stop("stopped", T)
    await leased(store, "dead-but-stopped", "dying", T - LEASE)
    await store.stop("dead-but-stopped", T)
    now = T + 1

    for page_size in (3, 25):
        pages = [page async for page in store.iter_orphans(now, page_size)]

        assert all(1 <= len(page) <= page_size for page in pages)
        listed = [conn.connection_id for page in pages for conn in page]
        assert sorted(listed) == sorted(unowned + dead)
        assert len(pages) >= (len(unowned) + len(dead)) // page_size
    for conn in [c async for page in store.iter_orphans(now, 7) for c in page]:
        assert conn == await store.get(conn.connection_id)  # whole connections, as stored


async def test_orphans_of_many_dead_sessions_come_each_once(store: ConnectionStore) -> None:
    """GIVEN 20 dead sessions (more than a store may read side by side) holding three
    connections each, and a live one WHEN listed in pages smaller and larger than a session's
    THEN each dead session's connections come exactly once, the live one's never."""
    dead = {f"gone-{s:02d}-{c}": f"dying-{s:02d}" for s in range(20) for c in range(3)}
    for cid, owner in dead.items():
        await leased(store, cid, owner, T - LEASE)
    await leased(store, "held", "live")

    for page_size in (2, 50):
        pages = [page async for page in store.iter_orphans(T + 1, page_size)]

        assert all(1 <= len(page) <= page_size for page in pages)
        listed = [conn.connection_id for page in pages for conn in page]
        assert sorted(listed) == sorted(dead)


async def test_orphans_come_in_pages_of_one_whatever_their_ids_sort_like(
    store: ConnectionStore,
) -> None:
    """A keyset cursor must start below every id: digits and capitals sort before lower case."""
    unowned = ["0-unowned", "A-unowned", "z-unowned"]
    for cid in unowned:
        await started(store, cid)
    dead = ["1-dead", "B-dead", "y-dead"]
    for cid in dead:
        await leased(store, cid, "dying", T - LEASE)

    pages = [page async for page in store.iter_orphans(T + 1, 1)]

    assert [len(page) for page in pages] == [1] * 6
    assert sorted(c.connection_id for page in pages for c in page) == sorted(unowned + dead)


async def test_orphans_in_pages_of_none_are_refused_by_name(store: ConnectionStore) -> None:
    await started(store, "c1")
    for page_size in (0, -1):
        with pytest.raises(ValueError, match="page_size must be positive"):
            _ = [page async for page in store.iter_orphans(T, page_size)]


async def test_orphans_are_wanted_unheld_and_not_backing_off(store: ConnectionStore) -> None:
    await started(store, "new")
    await leased(store, "held", "live")
    await leased(store, "expired-owner", "expiring", T - LEASE - 1)
    await leased(store, "ended-owner", "ending")
    await store.end_session("ending", "bye", T)
    released = await leased(store, "released", "live")
    await store.release("released", "live", released.token, 0, T)
    backing = await leased(store, "backing-off", "live")
    await store.report_upstream_failure("backing-off", "live", backing.token, 0, T + 5, "x", T)
    await started(store, "stopped")
    await store.stop("stopped", T)

    assert await orphan_ids(store, T + 1) == {"new", "expired-owner", "ended-owner", "released"}
    assert await orphan_ids(store, T + 6) == {
        "new",
        "expired-owner",
        "ended-owner",
        "released",
        "backing-off",
    }
    assert "held" not in await orphan_ids(store, T + LEASE)  # "live" lives to its expiry
    assert "held" in await orphan_ids(store, T + LEASE + 1)  # and is dead one ms after


async def test_next_available_at_is_the_earliest_backoff_end_of_an_unowned_connection(
    store: ConnectionStore,
) -> None:
    """A full scan wakes when an unowned connection's back-off ends; sessions expiring are
    not the store's answer here (the worker watches `list_sessions` for them)."""
    conn = await leased(store, "c1", "s1")  # s1 expires at T + LEASE
    await session(store, "s2", T + 10, lease=3 * LEASE)
    await store.report_upstream_failure("c1", "s1", conn.token, 0, T + 5, "x", T + 1)
    await started(store, "c2")
    await store.stop("c2", T)
    await session(store, "s3")
    await store.end_session("s3", "bye", T + 1)  # ended: never expires again

    assert await store.next_available_at(T + 2) == T + 5
    assert await store.next_available_at(T + 5) == T + 5  # inclusive
    assert await store.next_available_at(T + 6) is None  # live sessions are not answered


async def test_next_available_at_is_none_when_nothing_could_change(
    store: ConnectionStore,
) -> None:
    assert await store.next_available_at(T) is None
    assert [p async for p in store.iter_orphans(T, 10)] == []
    await started(store)
    assert await store.next_available_at(T) is None  # an orphan already, nothing to wait for


async def test_stop_requested_lists_exactly_the_sessions_stopped_connections_still_owned(
    store: ConnectionStore,
) -> None:
    for i in range(5):
        await leased(store, f"mine-{i}", "s1")
    await leased(store, "theirs", "s2")
    await store.stop("theirs", T + 1)
    for i in (0, 2, 3):
        await store.stop(f"mine-{i}", T + 1)
    # The port promises no order (an index by owner may not sort by id).
    assert sorted(await store.stop_requested("s1")) == ["mine-0", "mine-2", "mine-3"]

    token = (await store.get("mine-2")).token  # type: ignore[union-attr]
    await store.release("mine-2", "s1", token, 0, T + 2)
    conn3 = await store.get("mine-3")
    assert conn3 is not None
    await store.end_stream("mine-3", "s1", conn3.token, 0, T + 2)

    assert await store.stop_requested("s1") == ["mine-0"]
    assert await store.stop_requested("s2") == ["theirs"]
    assert await store.stop_requested("nobody") == []
    assert await store.stop_requested("") == []


async def test_owned_by_lists_every_connection_a_session_owns_whatever_its_state(
    store: ConnectionStore,
) -> None:
    for i in range(4):
        await leased(store, f"mine-{i}", "s1")
    await leased(store, "theirs", "s2")
    await started(store, "nobodys")
    await store.stop("mine-1", T + 1)  # STOPPED but still owned: still listed
    token = (await store.get("mine-2")).token  # type: ignore[union-attr]
    await store.release("mine-2", "s1", token, 0, T + 2)
    await store.end_session("s1", "dead", T + 3)  # a dead session's connections stay its own

    assert sorted(await store.owned_by("s1")) == ["mine-0", "mine-1", "mine-3"]
    assert await store.owned_by("s2") == ["theirs"]
    assert await store.owned_by("nobody") == []
    assert await store.owned_by("") == []
    taken = await store.try_acquire("mine-0", "s2", T + 4)
    assert taken is not None
    assert sorted(await store.owned_by("s1")) == ["mine-1", "mine-3"]
    assert sorted(await store.owned_by("s2")) == ["mine-0", "theirs"]


async def test_forget_session_deletes_only_dead_sessions_that_own_nothing(
    store: ConnectionStore,
) -> None:
    conn = await leased(store, "c1", "owner")
    await session(store, "live")
    await session(store, "idle")
    await store.end_session("idle", "bye", T + 1)
    later = T + LEASE + 1

    assert not await store.forget_session("live", T + 2)
    assert not await store.forget_session("owner", later)  # dead, but still owns c1
    assert not await store.forget_session("unknown", later)
    assert await store.forget_session("idle", T + 2)
    assert not await store.forget_session("idle", T + 3)  # gone already

    await store.release("c1", "owner", conn.token, 1, later)
    assert await store.forget_session("owner", later + 1)
    assert [s.session_id for s in await store.list_sessions()] == ["live"]
    assert await store.get_session("owner") is None
    # Its log outlives it; it can no more be renewed, nor acquire anything.
    assert [type(e) for e in await store.session_history("idle")] == [SessionOpened, SessionEnded]
    assert await store.renew_session("owner", LEASE, 0, 1, later + 2) is None
    assert await store.try_acquire("c1", "owner", later + 2) is None
    # What it gave back is an orphan still, and is acquired (not taken over) by the next one.
    assert await orphan_ids(store, later + 2) == {"c1"}
    await session(store, "next", later + 2)
    again = await store.try_acquire("c1", "next", later + 3)
    assert again is not None
    assert (again.token, isinstance((await store.history("c1"))[-1], LeaseAcquired)) == (2, True)


async def test_a_forgotten_sessions_id_is_never_opened_again(store: ConnectionStore) -> None:
    """The port promises an id is opened once; forgetting the row must not make it new again
    (a worker frozen past its session would otherwise find its id renewable by another)."""
    await session(store)
    await store.renew_session("s1", LEASE, 0, 1, T + 1)
    await store.end_session("s1", "bye", T + 2)
    assert await store.forget_session("s1", T + 3)

    with pytest.raises(InvalidCommand):
        await store.open_session("s1", LEASE, CAPACITY, T + 4)
    assert await store.get_session("s1") is None
    assert [type(e) for e in await store.session_history("s1")] == [SessionOpened, SessionEnded]


# --- history -----------------------------------------------------------------------------------


async def test_the_history_keeps_upstream_urls_with_their_credentials_masked(
    store: ConnectionStore,
) -> None:
    """The log is an audit trail any operator reads: only the connection's state keeps the
    URL the worker connects to, credentials and all."""
    secret = "wss://user:TopSecretPw@feeds.example.com/s?token=abc123&from_seq=5"
    restarted = "wss://feeds.example.com/s?api_key=k-9876"
    await store.start("c1", secret, T)
    await store.stop("c1", T + 1)
    await store.start("c1", restarted, T + 2)

    history = await store.history("c1")

    started_event, restarted_event = history[0], history[-1]
    assert isinstance(started_event, ConnectionStarted)
    assert started_event.ws_url == "wss://***@feeds.example.com/s?token=***&from_seq=5"
    assert isinstance(restarted_event, ConnectionRestarted)
    assert restarted_event.ws_url == "wss://feeds.example.com/s?api_key=***"
    assert (await store.get("c1")).ws_url == restarted  # type: ignore[union-attr]


async def test_history_is_the_ownership_log_in_version_order(store: ConnectionStore) -> None:
    await started(store)
    await session(store, "s1")
    await session(store, "s2")
    first = await store.try_acquire("c1", "s1", T + 1)
    assert first is not None
    await store.checkpoint("c1", "s1", first.token, 3, T + 2)
    await store.release("c1", "s1", first.token, 4, T + 3)
    second = await store.try_acquire("c1", "s2", T + 4)
    assert second is not None
    await store.stop("c1", T + 5)
    await store.release("c1", "s2", second.token, 4, T + 6)
    await store.start("c1", URL, T + 7)

    history = await store.history("c1")

    assert [type(e) for e in history] == [
        ConnectionStarted,
        LeaseAcquired,
        LeaseReleased,
        LeaseAcquired,
        StopRequested,
        LeaseReleased,
        ConnectionRestarted,
    ]
    versions = [e.version for e in history]
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
    assert versions[-1] == (await store.get("c1")).version  # type: ignore[union-attr]
    assert [e.at_ms for e in history] == [T, T + 1, T + 3, T + 4, T + 5, T + 6, T + 7]
    acquired = history[3]
    assert isinstance(acquired, LeaseAcquired)
    assert (acquired.owner, acquired.token) == ("s2", 2)
    assert all(e.connection_id == "c1" for e in history)
    assert await store.history("other") == []
    assert await store.session_history("other") == []


async def test_list_connections_is_sorted_by_id_and_limited(store: ConnectionStore) -> None:
    for cid in ["b", "c", "a"]:
        await started(store, cid)

    everything = await store.list_connections()
    two = await store.list_connections(limit=2)

    assert [c.connection_id for c in everything] == ["a", "b", "c"]
    assert everything[0] == await store.get("a")
    assert len(two) == 2
    assert [c.connection_id for c in two] == sorted(c.connection_id for c in two)
    assert await store.list_connections(limit=0) == []


# --- differential: any store behaves as the reference on the same commands ---------------------


async def test_random_command_sequences_leave_the_same_states_as_the_reference(
    store: ConnectionStore,
) -> None:
    """A seeded random mix of every command (valid, stale and wrong ones) on connections and
    sessions, applied to the in-memory reference and to the store under test: same outcomes,
    states, histories and query answers."""
    if isinstance(store, InMemoryConnectionStore):
        pytest.skip("the reference itself")
    reference = InMemoryConnectionStore()
    rng = random.Random(2026)
    ids = ["d1", "d2", "d3", "d4"]
    sessions = ["sa", "sb"]  # and every fresh one opened on the way (an id is opened once)
    succeeded: dict[str, int] = {}
    now = T

    for step in range(600):
        # Mostly small steps (sessions live a while), sometimes past a whole lease.
        now += rng.choices([0, 1, 500, 2_000, LEASE // 2, LEASE + 1], [2, 3, 4, 4, 1, 1])[0]
        cid = rng.choice(ids)
        current = await reference.get(cid)
        # Mostly the current owner, token and checkpoint, sometimes stale or wrong ones.
        owner = current.owner if current and current.owner else "sa"
        sid = rng.choice([owner, owner, owner, owner, *sessions[-2:], "sa"])
        token = (current.token if current else 0) + rng.choice([0, 0, 0, -1, 1])
        seq = (current.checkpoint_seq if current else 0) + rng.choice([0, 1, 7, -1])
        lease = rng.choice([LEASE, LEASE // 4, 3 * LEASE])
        method, args = rng.choice(
            [
                ("start", (cid, URL, now)),
                ("start", (cid, URL + "?v=2", now)),
                ("stop", (cid, now)),
                ("try_acquire", (cid, sid, now)),
                ("try_acquire", (cid, sid, now)),
                ("checkpoint", (cid, sid, token, seq, now)),
                ("release", (cid, sid, token, seq, now)),
                ("end_stream", (cid, sid, token, seq, now)),
                (
                    "report_upstream_failure",
                    (cid, sid, token, seq, now + rng.choice([0, 1_000, 30_000]), "boom", now),
                ),
                ("open_session", (sid, lease, CAPACITY, now)),
                ("open_session", (f"s{step}", lease, CAPACITY, now)),
                ("open_session", (f"s{step}", lease, CAPACITY, now)),
                ("renew_session", (sid, lease, step % 5, CAPACITY, now)),
                ("renew_session", (sid, lease, step % 5, CAPACITY, now)),
                ("end_session", (sid, "bye", now)),
                ("note_expiry", (sid, "sb", now)),
                ("forget_session", (sid, now)),
            ]
        )
        if method == "open_session" and args[0] not in sessions:
            sessions.append(str(args[0]))

        expected = await _outcome(reference, method, args)
        actual = await _outcome(store, method, args)
        assert actual == expected, f"step {step}: {method}{args}"
        if expected not in (None, False) and not isinstance(expected, type):
            succeeded[method] = succeeded.get(method, 0) + 1

    for cid in ids:
        assert await store.get(cid) == await reference.get(cid)
        assert await store.history(cid) == await reference.history(cid)
    for sid in sessions:
        assert await store.get_session(sid) == await reference.get_session(sid)
        assert await store.session_history(sid) == await reference.session_history(sid)
        assert sorted(await store.stop_requested(sid)) == await reference.stop_requested(sid)
        assert sorted(await store.owned_by(sid)) == await reference.owned_by(sid)
    assert _by_id(await store.list_sessions()) == await reference.list_sessions()
    for at in (now, now + LEASE // 2, now + 4 * LEASE):
        assert await store.next_available_at(at) == await reference.next_available_at(at)
        assert await orphan_ids(store, at) == await orphan_ids(reference, at)
    # The walk went deep: every command succeeded somewhere, takeovers included.
    assert set(succeeded) == {
        "start",
        "stop",
        "try_acquire",
        "checkpoint",
        "release",
        "end_stream",
        "report_upstream_failure",
        "open_session",
        "renew_session",
        "end_session",
        "note_expiry",
        "forget_session",
    }, sorted(succeeded.items())
    takeovers = [e for cid in ids for e in await reference.history(cid)]
    assert any(isinstance(e, LeaseTakenOver) for e in takeovers)


async def _outcome(store: ConnectionStore, method: str, args: Sequence[object]) -> object:
    """The call's result, or the type of the domain error it raised."""
    try:
        return await getattr(store, method)(*args)
    except DomainError as exc:
        return type(exc)


# --- races of different commands on one connection ----------------------------------------------

# Each racer gets the store, the connection id and `now`. The connection's sessions are named
# after it ("<cid>-s1" owns it in the setups, "<cid>-s2" is a live session wanting it), so the
# connections raced at once share nothing.
_Call = Callable[[ConnectionStore, str, int], Awaitable[object]]
_RACERS: dict[str, _Call] = {
    "start": lambda s, cid, now: s.start(cid, URL, now),
    "stop": lambda s, cid, now: s.stop(cid, now),
    "acquire": lambda s, cid, now: s.try_acquire(cid, f"{cid}-s2", now),
    "checkpoint": lambda s, cid, now: s.checkpoint(cid, f"{cid}-s1", 1, 9, now),
    "release": lambda s, cid, now: s.release(cid, f"{cid}-s1", 1, 9, now),
    "end_stream": lambda s, cid, now: s.end_stream(cid, f"{cid}-s1", 1, 9, now),
    "fail": lambda s, cid, now: s.report_upstream_failure(
        cid, f"{cid}-s1", 1, 9, now + 30_000, "x", now
    ),
    "renew_session": lambda s, cid, now: s.renew_session(f"{cid}-s1", LEASE, 1, 1, now),
    "end_session": lambda s, cid, now: s.end_session(f"{cid}-s1", "bye", now),
    "forget_session": lambda s, cid, now: s.forget_session(f"{cid}-s1", now),
    "note_expiry": lambda s, cid, now: s.note_expiry(f"{cid}-s1", f"{cid}-s2", now),
}


async def _held(store: ConnectionStore, cid: str) -> int:
    """<cid>-s1 holds the lease (token 1, checkpoint 5), <cid>-s2 is live for long; returns a
    `now` inside <cid>-s1's session."""
    conn = await leased(store, cid, f"{cid}-s1")
    await session(store, f"{cid}-s2", T, lease=10 * LEASE)
    await store.checkpoint(cid, f"{cid}-s1", conn.token, 5, T + 1)
    return T + 2


async def _expired(store: ConnectionStore, cid: str) -> int:
    await _held(store, cid)
    return T + LEASE + 1


async def _stopped(store: ConnectionStore, cid: str) -> int:
    await _held(store, cid)
    await store.release(cid, f"{cid}-s1", 1, 5, T + 2)
    await store.stop(cid, T + 3)
    return T + 4


async def _free(store: ConnectionStore, cid: str) -> int:
    await _held(store, cid)
    await store.release(cid, f"{cid}-s1", 1, 5, T + 2)
    return T + 3


async def _free_and_dead(store: ConnectionStore, cid: str) -> int:
    """<cid>-s1 gave the connection back and then expired: nothing refers to it any more."""
    await _free(store, cid)
    return T + LEASE + 1


_SETUPS = {
    "held": _held,
    "expired": _expired,
    "stopped": _stopped,
    "free": _free,
    "free_and_dead": _free_and_dead,
}
_RACES = [
    ("held", "stop", "release"),
    ("held", "stop", "checkpoint"),
    ("held", "stop", "end_stream"),
    ("held", "stop", "fail"),
    ("held", "checkpoint", "release"),
    ("held", "checkpoint", "end_stream"),
    ("held", "release", "fail"),
    ("held", "acquire", "end_session"),  # a takeover racing the owner's graceful end
    ("held", "acquire", "renew_session"),
    ("held", "acquire", "release"),
    ("expired", "acquire", "stop"),
    ("expired", "acquire", "release"),
    ("expired", "acquire", "checkpoint"),
    ("expired", "acquire", "end_stream"),
    ("expired", "acquire", "fail"),
    ("expired", "acquire", "renew_session"),  # the late heartbeat of the dead session
    ("expired", "acquire", "end_session"),
    ("expired", "acquire", "forget_session"),
    ("expired", "acquire", "note_expiry"),  # the record written while its connection is taken
    ("expired", "note_expiry", "end_session"),
    ("free_and_dead", "note_expiry", "forget_session"),
    ("expired", "release", "forget_session"),
    ("stopped", "start", "stop"),
    ("stopped", "start", "acquire"),
    ("free", "acquire", "stop"),
    ("free_and_dead", "forget_session", "acquire"),
]


@pytest.mark.parametrize(("setup", "first", "second"), _RACES, ids=["-".join(r) for r in _RACES])
async def test_two_different_commands_racing_on_one_connection_act_as_one_after_the_other(
    store: ConnectionStore, setup: str, first: str, second: str
) -> None:
    """GIVEN a connection and its sessions in `setup` WHEN `first` and `second` are sent at
    once THEN results, states and histories are those of one of the two serial orders, decided
    on the in-memory reference: the loser of the race decides again on what won, never on what
    it had read (racing identical commands cannot show that; the rule alone separates those)."""
    cids = [f"race-{i}" for i in range(4)]
    nows = {cid: await _SETUPS[setup](store, cid) for cid in cids}
    a, b = _RACERS[first], _RACERS[second]

    async def race(i: int, cid: str) -> list[object]:
        calls = [_settled(a, store, cid, nows[cid]), _settled(b, store, cid, nows[cid])]
        if i % 2:
            calls.reverse()  # half the connections get them in the other order
        results = list(await asyncio.gather(*calls))
        return results[::-1] if i % 2 else results  # as (first, second)

    outcomes = await asyncio.gather(*(race(i, cid) for i, cid in enumerate(cids)))

    for i, cid in enumerate(cids):
        seen = (outcomes[i], await _observed(store, cid))
        (ab, after_ab), (ba, after_ba) = [
            await _serially(setup, cid, order) for order in ((a, b), (b, a))
        ]
        serial_orders = [(ab, after_ab), (ba[::-1], after_ba)]  # results as (first, second)
        assert seen in serial_orders, f"{cid}: {first} and {second} raced into {seen}"


async def test_a_late_renew_and_a_takeover_at_skewed_clocks_follow_the_domains_rule(
    store: ConnectionStore,
) -> None:
    """What the contract promises when the dead session's heartbeat and a takeover race with
    clocks that disagree: only that the outcome is one of the two serial orders, each command
    judged by the domain at its own `now`. At one `now` the two exclude each other (the races
    above). With the renewer's clock behind (its `now` inside the session, the taker's past
    it), both may succeed — taken first, renewed second — and the store cannot tell: it has no
    clock of its own. The skew budget (docs/decisions.md) keeps a worker from trusting its
    session that long; what the contract does promise is that the renewed session's token is
    stale: it can write nothing under it."""
    cid = "skewed"
    await _held(store, cid)
    renewer_now, taker_now = T + LEASE, T + LEASE + 1  # 1 ms of skew, across the expiry

    renewed, taken = await asyncio.gather(
        store.renew_session(f"{cid}-s1", LEASE, 1, 1, renewer_now),
        store.try_acquire(cid, f"{cid}-s2", taker_now),
    )

    renew = (_RACERS["renew_session"], renewer_now)
    take = (_RACERS["acquire"], taker_now)
    serial = []
    for order in ((renew, take), (take, renew)):
        reference = InMemoryConnectionStore()
        await _held(reference, cid)
        serial.append([await _settled(call, reference, cid, now) for call, now in order])
    assert [renewed, taken] in (serial[0], serial[1][::-1])
    if taken is not None:  # taken over: the old owner is fenced whether or not it renewed
        assert not await store.checkpoint(cid, f"{cid}-s1", 1, 9, renewer_now)
        with pytest.raises(LeaseLost):
            await store.release(cid, f"{cid}-s1", 1, 9, renewer_now)
    else:  # renewed first: the session lives on, and so does its lease
        assert renewed is not None
        assert (await store.get(cid)).owner == f"{cid}-s1"  # type: ignore[union-attr]

    # Each serial order, played out on the store under test (no race): both are allowed.
    first, then = "taken-first", "renewed-first"
    for c in (first, then):
        await _held(store, c)
    assert await store.try_acquire(first, f"{first}-s2", taker_now) is not None
    assert await store.renew_session(f"{first}-s1", LEASE, 1, 1, renewer_now) is not None
    assert not await store.checkpoint(first, f"{first}-s1", 1, 9, renewer_now)  # fenced
    assert await store.renew_session(f"{then}-s1", LEASE, 1, 1, renewer_now) is not None
    assert await store.try_acquire(then, f"{then}-s2", taker_now) is None


async def _settled(call: _Call, store: ConnectionStore, cid: str, now: int) -> object:
    try:
        return await call(store, cid, now)
    except DomainError as exc:
        return type(exc)


async def _observed(store: ConnectionStore, cid: str) -> tuple[object, ...]:
    return (
        await store.get(cid),
        await store.history(cid),
        [await store.get_session(f"{cid}-s{i}") for i in (1, 2)],
        [await store.session_history(f"{cid}-s{i}") for i in (1, 2)],
    )


async def _serially(
    setup: str, cid: str, order: tuple[_Call, _Call]
) -> tuple[list[object], tuple[object, ...]]:
    reference = InMemoryConnectionStore()
    now = await _SETUPS[setup](reference, cid)
    results = [await _settled(call, reference, cid, now) for call in order]
    return results, await _observed(reference, cid)
