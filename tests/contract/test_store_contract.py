"""The ConnectionStore contract: one suite, run unchanged against every store (see conftest.py).

The reference is `domain.decide`; the in-memory store applies it by construction, so every
assertion here is what decide says, and the differential test at the end compares any other
store with the in-memory one over a long random command sequence.
"""

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence

import pytest

from adapters.memory.store import InMemoryConnectionStore
from application.ports import ConnectionStore, RenewResult
from domain import (
    NO_OWNER,
    CheckpointRegressed,
    Connection,
    ConnectionConflict,
    ConnectionNotFound,
    ConnectionRestarted,
    ConnectionStarted,
    DesiredState,
    DomainError,
    Event,
    InvalidCommand,
    LeaseAcquired,
    LeaseLost,
    LeaseReleased,
    LeaseTakenOver,
    StopReason,
    StopRequested,
    StreamEnded,
    UpstreamFailed,
)

T = 1_700_000_000_000  # "now" in epoch ms; the stores take time from the caller
LEASE = 20_000
URL = "wss://upstream.example/stream/1"


def assert_refused(result: RenewResult, state: Connection | None) -> None:
    """A refused renew; it may carry the refusing state (when the store gets it for free, as
    DynamoDB does), and if it does, that is the stored state."""
    assert not result.renewed
    assert result.connection in (None, state)


async def started(store: ConnectionStore, cid: str = "c1", now: int = T) -> Connection:
    return (await store.start(cid, URL, now)).connection


async def leased(
    store: ConnectionStore, cid: str = "c1", worker: str = "w1", now: int = T
) -> Connection:
    await started(store, cid, now)
    conn = await store.try_acquire(cid, worker, LEASE, now)
    assert conn is not None
    return conn


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


async def test_repeated_start_changes_nothing_not_lease_token_or_checkpoint(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    renewed = await store.renew("c1", "w1", conn.token, LEASE, 42, T + 1)
    assert renewed.connection is not None

    again = await store.start("c1", URL, T + 2)

    assert not again.changed
    assert again.connection == renewed.connection
    assert await store.get("c1") == renewed.connection


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
    assert (stopped.owner, stopped.token) == ("w1", conn.token)  # the owner sees it and releases
    assert again.connection == stopped
    assert [type(e) for e in await store.history("c1")][-1] is StopRequested


async def test_of_racing_stops_exactly_one_reports_the_change(store: ConnectionStore) -> None:
    await started(store)

    results = await asyncio.gather(*(store.stop("c1", T + 1) for _ in range(8)))

    assert sum(r.changed for r in results) == 1
    assert [type(e) for e in await store.history("c1")].count(StopRequested) == 1


async def test_stopped_connection_is_never_acquired(store: ConnectionStore) -> None:
    await started(store)
    await store.stop("c1", T)

    assert await store.try_acquire("c1", "w1", LEASE, T + 1) is None
    assert await store.try_acquire("c1", "w1", LEASE, T + 10 * LEASE) is None
    assert (await store.get("c1")).version == 2  # type: ignore[union-attr]  # nothing written
    assert [c async for c in store.iter_orphans(T + 10 * LEASE, 10)] == []


async def test_start_after_stop_restarts_keeping_checkpoint_and_token(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    await store.release("c1", "w1", conn.token, 17, T + 1)
    await store.stop("c1", T + 2)

    restarted = await store.start("c1", "wss://moved.example/s", T + 3)

    assert restarted.changed
    assert restarted.connection.desired_state is DesiredState.STARTED
    assert restarted.connection.ws_url == "wss://moved.example/s"
    assert restarted.connection.stop_reason is None
    assert restarted.connection.checkpoint_seq == 17
    assert restarted.connection.token == conn.token
    again = await store.try_acquire("c1", "w2", LEASE, T + 4)
    assert again is not None
    assert (again.token, again.resume_from_seq) == (conn.token + 1, 18)
    assert isinstance((await store.history("c1"))[-2], ConnectionRestarted)


async def test_get_of_unknown_connection_is_none(store: ConnectionStore) -> None:
    assert await store.get("nobody") is None
    assert await store.get("not a valid id") is None


# --- acquire -----------------------------------------------------------------------------------


async def test_acquire_grants_a_lease_with_a_new_token(store: ConnectionStore) -> None:
    await started(store)

    conn = await store.try_acquire("c1", "w1", LEASE, T + 5)

    assert conn is not None
    assert (conn.owner, conn.token, conn.expires_at_ms) == ("w1", 1, T + 5 + LEASE)
    assert conn.version == 2
    assert conn.resume_from_seq == 1
    assert await store.get("c1") == conn


async def test_concurrent_acquires_of_one_connection_exactly_one_wins(
    store: ConnectionStore,
) -> None:
    await started(store)

    results = await asyncio.gather(
        *(store.try_acquire("c1", f"w{i}", LEASE, T + 1) for i in range(20))
    )

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    stored = await store.get("c1")
    assert stored == winners[0]
    assert stored is not None
    assert stored.token == 1
    assert [type(e) for e in await store.history("c1")] == [ConnectionStarted, LeaseAcquired]


async def test_held_lease_is_not_acquired_even_by_its_owner(store: ConnectionStore) -> None:
    conn = await leased(store)

    assert await store.try_acquire("c1", "w2", LEASE, T + LEASE) is None  # expiry is inclusive
    assert await store.try_acquire("c1", "w1", LEASE, T + 1) is None
    assert await store.get("c1") == conn


async def test_acquire_of_unknown_or_invalid_connection_is_none(store: ConnectionStore) -> None:
    assert await store.try_acquire("nobody", "w1", LEASE, T) is None
    assert await store.try_acquire("not valid", "w1", LEASE, T) is None
    await started(store)
    assert await store.try_acquire("c1", "w1", 0, T) is None  # a lease must last


async def test_expired_lease_is_taken_over_and_the_log_names_the_previous_owner(
    store: ConnectionStore,
) -> None:
    first = await leased(store)
    await store.renew("c1", "w1", first.token, LEASE, 9, T + 1_000)
    expired_at = T + 1_000 + LEASE

    taken = await store.try_acquire("c1", "w2", LEASE, expired_at + 1)

    assert taken is not None
    assert (taken.owner, taken.token, taken.resume_from_seq) == ("w2", 2, 10)
    last = (await store.history("c1"))[-1]
    assert isinstance(last, LeaseTakenOver)
    assert (last.owner, last.token) == ("w2", 2)
    assert (last.previous_owner, last.previous_token) == ("w1", 1)
    assert last.previous_expires_at_ms == expired_at
    assert last.version == taken.version


async def test_released_lease_is_acquired_not_taken_over(store: ConnectionStore) -> None:
    conn = await leased(store)
    await store.release("c1", "w1", conn.token, 0, T + 1)

    again = await store.try_acquire("c1", "w2", LEASE, T + 2)

    assert again is not None
    assert again.token == 2
    assert isinstance((await store.history("c1"))[-1], LeaseAcquired)


# --- renew, release and fencing ----------------------------------------------------------------


async def test_old_owner_is_fenced_off_after_a_takeover(store: ConnectionStore) -> None:
    old = await leased(store)
    new = await store.try_acquire("c1", "w2", LEASE, T + LEASE + 1)
    assert new is not None
    later = T + LEASE + 2

    refused = await store.renew("c1", "w1", old.token, LEASE, 0, later)
    assert not refused.renewed
    assert_refused(refused, new)
    with pytest.raises(LeaseLost):
        await store.release("c1", "w1", old.token, 0, later)
    with pytest.raises(LeaseLost):
        await store.end_stream("c1", "w1", old.token, 0, later)
    with pytest.raises(LeaseLost):
        await store.report_upstream_failure("c1", "w1", old.token, 0, later + 9, "x", later)
    # The same worker id with the old token is just as stale (a restarted worker, say).
    assert not (await store.renew("c1", "w2", old.token, LEASE, 0, later)).renewed
    assert await store.get("c1") == new


async def test_renew_extends_the_lease_and_never_shortens_it(store: ConnectionStore) -> None:
    conn = await leased(store)

    longer = await store.renew("c1", "w1", conn.token, 3 * LEASE, 0, T + 10)
    assert longer.renewed
    assert longer.connection is not None
    assert longer.connection.expires_at_ms == T + 10 + 3 * LEASE

    shorter = await store.renew("c1", "w1", conn.token, LEASE, 0, T + 20)
    assert shorter.renewed
    assert shorter.connection is not None
    assert shorter.connection.expires_at_ms == T + 10 + 3 * LEASE  # kept, not shortened
    assert shorter.connection.version == longer.connection.version + 1
    assert shorter.connection.updated_at_ms == T + 20
    assert await store.get("c1") == shorter.connection


async def test_renew_of_an_expired_lease_is_refused_even_if_nobody_took_over(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)

    late = await store.renew("c1", "w1", conn.token, LEASE, 0, T + LEASE + 1)

    assert_refused(late, conn)
    # ...but its owner may still release it (frees the connection sooner).
    released = await store.release("c1", "w1", conn.token, 0, T + LEASE + 2)
    assert released.owner == NO_OWNER


async def test_renew_of_unknown_connection_or_with_a_bad_lease_is_refused(
    store: ConnectionStore,
) -> None:
    assert await store.renew("nobody", "w1", 1, LEASE, 0, T) == RenewResult(False, None)
    assert await store.renew("not valid", "w1", 1, LEASE, 0, T) == RenewResult(False, None)
    conn = await leased(store)
    zero = await store.renew("c1", "w1", conn.token, 0, 0, T + 1)
    assert_refused(zero, conn)


async def test_renew_records_the_checkpoint_and_a_checkpoint_never_regresses(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)  # version 2

    same = await store.renew("c1", "w1", conn.token, LEASE, 0, T + 1)
    advanced = await store.renew("c1", "w1", conn.token, LEASE, 50, T + 2)
    behind = await store.renew("c1", "w1", conn.token, LEASE, 49, T + 3)

    assert same.connection is not None
    assert same.connection.version == 3
    assert advanced.connection is not None
    assert advanced.connection.version == 5
    assert advanced.connection.checkpoint_seq == 50
    assert_refused(behind, advanced.connection)
    with pytest.raises(CheckpointRegressed):
        await store.release("c1", "w1", conn.token, 49, T + 4)
    released = await store.release("c1", "w1", conn.token, 60, T + 5)
    assert released.checkpoint_seq == 60
    assert released.version == advanced.connection.version + 2  # Checkpointed, LeaseReleased


async def test_renewals_and_checkpoints_are_not_in_the_history(store: ConnectionStore) -> None:
    conn = await leased(store)
    for i in range(1, 6):
        await store.renew("c1", "w1", conn.token, LEASE, i, T + i)
    await store.release("c1", "w1", conn.token, 9, T + 10)

    history = await store.history("c1")

    assert [type(e) for e in history] == [ConnectionStarted, LeaseAcquired, LeaseReleased]
    assert [e.version for e in history] == [1, 2, 14]  # 5 x (renew + checkpoint), 1 checkpoint


async def test_release_frees_the_connection_for_anyone(store: ConnectionStore) -> None:
    conn = await leased(store)

    released = await store.release("c1", "w1", conn.token, 5, T + 1)

    assert (released.owner, released.expires_at_ms, released.token) == (NO_OWNER, 0, 1)
    assert released.is_orphan(T + 2)
    assert [c async for page in store.iter_orphans(T + 2, 10) for c in page] == [released]


# --- upstream failures and back-off ------------------------------------------------------------


async def test_upstream_failures_back_off_acquire_and_progress_clears_them(
    store: ConnectionStore,
) -> None:
    conn = await leased(store)
    backoff_until = T + 60_000

    failed = await store.report_upstream_failure(
        "c1", "w1", conn.token, 0, backoff_until, "refused", T + 1
    )

    assert (failed.failures, failed.not_before_ms, failed.owner) == (1, backoff_until, NO_OWNER)
    assert failed.available_at_ms == backoff_until
    assert await store.try_acquire("c1", "w2", LEASE, backoff_until) is None  # inclusive
    assert [p async for p in store.iter_orphans(backoff_until, 10)] == []
    assert await store.next_available_at(T + 2) == backoff_until

    second = await store.try_acquire("c1", "w2", LEASE, backoff_until + 1)
    assert second is not None
    assert second.failures == 1  # acquiring is not progress
    again = await store.report_upstream_failure(
        "c1", "w2", second.token, 0, backoff_until + 2, "refused", backoff_until + 2
    )
    assert again.failures == 2  # no progress during that lease either

    third = await store.try_acquire("c1", "w3", LEASE, backoff_until + 3)
    assert third is not None
    progressed = await store.renew("c1", "w3", third.token, LEASE, 1, backoff_until + 4)
    assert progressed.connection is not None
    assert progressed.connection.failures == 0
    failed_after_progress = await store.report_upstream_failure(
        "c1", "w3", third.token, 2, backoff_until + 9, "dropped", backoff_until + 5
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

    ended = await store.end_stream("c1", "w1", conn.token, 77, T + 1)

    assert ended.desired_state is DesiredState.STOPPED
    assert ended.stop_reason is StopReason.STREAM_ENDED
    assert (ended.owner, ended.checkpoint_seq) == (NO_OWNER, 77)
    assert await store.try_acquire("c1", "w2", LEASE, T + 2) is None
    assert await store.desired_states(["c1"]) == {"c1": DesiredState.STOPPED}
    assert await store.next_available_at(T) is None
    types = [type(e) for e in await store.history("c1")]
    assert types[-2:] == [StreamEnded, LeaseReleased]


async def test_end_of_stream_after_a_stop_only_releases(store: ConnectionStore) -> None:
    conn = await leased(store)
    await store.stop("c1", T + 1)

    ended = await store.end_stream("c1", "w1", conn.token, 0, T + 2)

    assert ended.stop_reason is StopReason.REQUESTED
    assert [type(e) for e in await store.history("c1")][-2:] == [StopRequested, LeaseReleased]


# --- reconciliation queries --------------------------------------------------------------------


async def test_orphans_are_paged_over_every_shard_until_all_are_returned(
    store: ConnectionStore,
) -> None:
    """GIVEN 80 orphans (several in most index shards) plus held and stopped connections
    WHEN listed in small pages (each shard needs several) and in large ones (one page spans
    shards) THEN each orphan comes exactly once and no page is too big."""
    ids = [f"orphan-{i:03d}" for i in range(80)]
    for cid in ids:
        await started(store, cid)
    await leased(store, "held")
    await started(store, "stopped")
    await store.stop("stopped", T)

    for page_size in (3, 25):
        pages = [page async for page in store.iter_orphans(T + 1, page_size)]

        assert all(1 <= len(page) <= page_size for page in pages)
        listed = [conn.connection_id for page in pages for conn in page]
        assert sorted(listed) == ids
        assert len(pages) >= len(ids) // page_size
    sample = [c async for page in store.iter_orphans(T + 1, 7) for c in page][-1]
    assert sample == await store.get(sample.connection_id)  # whole connections, as stored


async def test_orphans_are_wanted_unheld_and_not_backing_off(store: ConnectionStore) -> None:
    await started(store, "new")
    held = await leased(store, "held")
    await leased(store, "expired", now=T - LEASE - 1)
    released = await leased(store, "released")
    await store.release("released", "w1", released.token, 0, T)
    backing = await leased(store, "backing-off")
    await store.report_upstream_failure("backing-off", "w1", backing.token, 0, T + 5, "x", T)
    await started(store, "stopped")
    await store.stop("stopped", T)

    now = T + 1
    assert await _orphan_ids(store, now) == {"new", "expired", "released"}
    assert await store.next_available_at(now) == T + 5  # the back-off ends before the lease
    assert await store.next_available_at(T + 6) == held.expires_at_ms
    assert await store.next_available_at(held.expires_at_ms + 1) is None


async def test_next_available_at_is_none_without_connections(store: ConnectionStore) -> None:
    assert await store.next_available_at(T) is None
    assert [p async for p in store.iter_orphans(T, 10)] == []


async def test_desired_states_of_many_ids_including_unknown_ones(store: ConnectionStore) -> None:
    known = [f"conn-{i:03d}" for i in range(70)]
    for cid in known:
        await started(store, cid)
    for cid in known[::3]:
        await store.stop(cid, T + 1)
    unknown = [f"ghost-{i}" for i in range(45)]  # 115 distinct ids: more than one batch
    asked = [*known, *unknown, known[0], known[1], "not a valid id"]  # duplicates, junk

    states = await store.desired_states(asked)

    assert dict(states) == {
        cid: DesiredState.STOPPED if i % 3 == 0 else DesiredState.STARTED
        for i, cid in enumerate(known)
    }
    assert await store.desired_states([]) == {}


async def test_history_is_the_ownership_log_in_version_order(store: ConnectionStore) -> None:
    await started(store)
    first = await store.try_acquire("c1", "w1", LEASE, T + 1)
    assert first is not None
    await store.renew("c1", "w1", first.token, LEASE, 3, T + 2)
    await store.release("c1", "w1", first.token, 4, T + 3)
    second = await store.try_acquire("c1", "w2", LEASE, T + 4)
    assert second is not None
    await store.stop("c1", T + 5)
    await store.release("c1", "w2", second.token, 4, T + 6)
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
    assert (acquired.owner, acquired.token, acquired.expires_at_ms) == ("w2", 2, T + 4 + LEASE)
    assert all(e.connection_id == "c1" for e in history)
    assert await store.history("other") == []


async def test_list_connections_is_sorted_by_id_and_limited(store: ConnectionStore) -> None:
    for cid in ["b", "c", "a"]:
        await started(store, cid)

    everything = await store.list_connections()
    two = await store.list_connections(limit=2)

    assert [c.connection_id for c in everything] == ["a", "b", "c"]
    assert everything[0] == await store.get("a")
    assert len(two) == 2
    assert [c.connection_id for c in two] == sorted(c.connection_id for c in two)


# --- differential: any store behaves as the reference on the same commands ---------------------


async def test_random_command_sequences_leave_the_same_states_as_the_reference(
    store: ConnectionStore,
) -> None:
    """A seeded random mix of every command (valid, stale and wrong ones) applied to the
    in-memory reference and to the store under test: same outcomes, states and histories."""
    if isinstance(store, InMemoryConnectionStore):
        pytest.skip("the reference itself")
    reference = InMemoryConnectionStore()
    rng = random.Random(2026)
    ids = ["d1", "d2", "d3", "d4"]
    now = T

    for step in range(400):
        now += rng.choice([0, 1, 500, 5_000, LEASE // 2, LEASE + 1])
        cid = rng.choice(ids)
        current = await reference.get(cid)
        # Mostly the current owner, token and checkpoint, sometimes stale or wrong ones.
        owner = current.owner if current and current.owner else "wa"
        worker = rng.choice([owner, owner, "wa", "wb", "wc"])
        token = (current.token if current else 0) + rng.choice([0, 0, 0, -1, 1])
        seq = (current.checkpoint_seq if current else 0) + rng.choice([0, 1, 7, -1])
        lease = rng.choice([LEASE, LEASE // 4, 3 * LEASE])
        method, args = rng.choice(
            [
                ("start", (cid, URL, now)),
                ("start", (cid, URL + "?v=2", now)),
                ("stop", (cid, now)),
                ("try_acquire", (cid, worker, lease, now)),
                ("try_acquire", (cid, worker, lease, now)),
                ("renew", (cid, worker, token, lease, seq, now)),
                ("renew", (cid, worker, token, lease, seq, now)),
                ("release", (cid, worker, token, seq, now)),
                ("end_stream", (cid, worker, token, seq, now)),
                (
                    "report_upstream_failure",
                    (cid, worker, token, seq, now + rng.choice([0, 1_000, 30_000]), "boom", now),
                ),
            ]
        )

        expected = await _outcome(reference, method, args)
        actual = await _outcome(store, method, args)
        assert actual == expected, f"step {step}: {method}{args}"

    for cid in ids:
        assert await store.get(cid) == await reference.get(cid)
        assert await store.history(cid) == await reference.history(cid)
    assert await store.desired_states(ids) == await reference.desired_states(ids)
    assert await store.next_available_at(now) == await reference.next_available_at(now)
    assert await _orphan_ids(store, now) == await _orphan_ids(reference, now)


async def _outcome(store: ConnectionStore, method: str, args: tuple[object, ...]) -> object:
    """The call's result, or the type of the domain error it raised. A refused renew counts
    as refused whether or not the store returned the refusing state (the port allows both)."""
    try:
        result = await getattr(store, method)(*args)
    except DomainError as exc:
        return type(exc)
    if isinstance(result, RenewResult) and not result.renewed:
        return RenewResult(False, None)
    return result


async def _orphan_ids(store: ConnectionStore, now: int) -> set[str]:
    return {c.connection_id async for page in store.iter_orphans(now, 3) for c in page}


# --- races of different commands on one connection ----------------------------------------------

# Each racer: (name, call). The call gets the store, the connection id and `now`.
_Call = Callable[[ConnectionStore, str, int], Awaitable[object]]
_RACERS: dict[str, _Call] = {
    "start": lambda s, cid, now: s.start(cid, URL, now),
    "stop": lambda s, cid, now: s.stop(cid, now),
    "acquire": lambda s, cid, now: s.try_acquire(cid, "w2", LEASE, now),
    "renew": lambda s, cid, now: s.renew(cid, "w1", 1, LEASE, 9, now),
    "release": lambda s, cid, now: s.release(cid, "w1", 1, 9, now),
    "end_stream": lambda s, cid, now: s.end_stream(cid, "w1", 1, 9, now),
    "fail": lambda s, cid, now: s.report_upstream_failure(cid, "w1", 1, 9, now + 30_000, "x", now),
}


async def _held(store: ConnectionStore, cid: str) -> int:
    """w1 holds the lease (token 1, checkpoint 5); returns a `now` inside it."""
    conn = await leased(store, cid)
    await store.renew(cid, "w1", conn.token, LEASE, 5, T + 1)
    return T + 2


async def _expired(store: ConnectionStore, cid: str) -> int:
    await _held(store, cid)
    return T + 1 + LEASE + 1


async def _stopped(store: ConnectionStore, cid: str) -> int:
    await _held(store, cid)
    await store.release(cid, "w1", 1, 5, T + 2)
    await store.stop(cid, T + 3)
    return T + 4


async def _free(store: ConnectionStore, cid: str) -> int:
    await _held(store, cid)
    await store.release(cid, "w1", 1, 5, T + 2)
    return T + 3


_SETUPS = {"held": _held, "expired": _expired, "stopped": _stopped, "free": _free}
_RACES = [
    ("held", "stop", "release"),
    ("held", "stop", "renew"),
    ("held", "stop", "end_stream"),
    ("held", "stop", "fail"),
    ("held", "renew", "release"),
    ("held", "renew", "end_stream"),
    ("held", "release", "fail"),
    ("expired", "acquire", "stop"),
    ("expired", "acquire", "release"),
    ("expired", "acquire", "renew"),
    ("expired", "acquire", "end_stream"),
    ("expired", "acquire", "fail"),
    ("stopped", "start", "stop"),
    ("stopped", "start", "acquire"),
    ("free", "acquire", "stop"),
]


@pytest.mark.parametrize(("setup", "first", "second"), _RACES, ids=["-".join(r) for r in _RACES])
async def test_two_different_commands_racing_on_one_connection_act_as_one_after_the_other(
    store: ConnectionStore, setup: str, first: str, second: str
) -> None:
    """GIVEN a connection in `setup` WHEN `first` and `second` are sent at once THEN results,
    state and history are those of one of the two serial orders, decided on the in-memory
    reference: the loser of the race decides again on what won, never on what it had read
    (racing identical commands cannot show that; the rule alone separates those)."""
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
        seen = (outcomes[i], await store.get(cid), await store.history(cid))
        serial = [await _serially(setup, cid, order) for order in ((a, b), (b, a))]
        assert seen in [
            serial[0],
            ([serial[1][0][1], serial[1][0][0]], serial[1][1], serial[1][2]),
        ], f"{cid}: {first} and {second} raced into {seen}"


async def _settled(call: _Call, store: ConnectionStore, cid: str, now: int) -> object:
    try:
        result = await call(store, cid, now)
    except DomainError as exc:
        return type(exc)
    if isinstance(result, RenewResult) and not result.renewed:
        return RenewResult(False, None)
    return result


async def _serially(
    setup: str, cid: str, order: tuple[_Call, _Call]
) -> tuple[list[object], Connection | None, Sequence[Event]]:
    reference = InMemoryConnectionStore()
    now = await _SETUPS[setup](reference, cid)
    results = [await _settled(call, reference, cid, now) for call in order]
    return results, await reference.get(cid), await reference.history(cid)


# --- the heartbeat's no-read path is fenced by the token, not just the owner ---------------------


async def test_a_worker_that_took_its_own_expired_lease_over_cannot_renew_its_old_token(
    store: ConnectionStore,
) -> None:
    """GIVEN w1 heartbeating under token 1 (so a store may renew it without a read) WHEN its
    lease expires and w1 itself takes the connection over (token 2) THEN token 1 is stale:
    renewing, releasing or checkpointing with it is refused and changes nothing."""
    old = await leased(store)
    warm = await store.renew("c1", "w1", old.token, LEASE, 3, T + 1)
    assert warm.renewed
    again = await store.try_acquire("c1", "w1", LEASE, T + 1 + LEASE + 1)
    assert again is not None
    assert (again.owner, again.token) == ("w1", old.token + 1)
    now = T + LEASE + 5

    stale = await store.renew("c1", "w1", old.token, LEASE, 3, now)
    assert_refused(stale, again)
    advancing = await store.renew("c1", "w1", old.token, LEASE, 4, now)
    assert_refused(advancing, again)
    with pytest.raises(LeaseLost):
        await store.release("c1", "w1", old.token, 4, now)
    assert await store.get("c1") == again
    current = await store.renew("c1", "w1", again.token, LEASE, 4, now + 1)
    assert current.renewed
