"""Races on DynamoDB Local with nothing in front of it: N acquirers, each with a client (and a
connection pool) and a worker session of its own, go for one connection at the same moment,
round after round. DynamoDB's conditions must leave exactly one winner every round: of an
orphan, of a takeover from a dead session, of racing STOPs and STARTs; and a takeover must never
land on a connection whose owner's session was renewed in the meantime. moto cannot judge this
(it is not atomic, so the fallback serializes it and these tests would prove nothing there:
they skip)."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.tables import create_tables
from domain import ConnectionRestarted, LeaseAcquired, LeaseTakenOver, StopRequested, WorkerSession
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import TABLES, FaultyClient, dynamodb_client

RACERS = 10
ROUNDS = 20
T = 1_700_000_000_000
LEASE = 5_000
LONG = 1_000 * LEASE  # the racers' sessions outlive every test
URL = "wss://upstream.example/s"
SHARDS = 4


def racer_session(i: int) -> str:
    return f"racer-{i}"


@pytest.fixture
async def clients(aws: LocalAws) -> AsyncIterator[list[Any]]:
    if not aws.on_dynamodb_local:
        pytest.skip(f"needs DynamoDB Local: {aws.fallback} (moto serializes every request)")
    async with AsyncExitStack() as stack:
        clients: list[Any] = [
            await stack.enter_async_context(dynamodb_client(aws)) for _ in range(RACERS + 1)
        ]
        await create_tables(clients[0], TABLES, SHARDS)
        # One request each first, so every racer has an open connection when the race starts.
        await asyncio.gather(*(c.describe_table(TableName=TABLES.connections) for c in clients))
        yield clients


def store_on(client: Any) -> DynamoDbConnectionStore:
    return DynamoDbConnectionStore(client, tables=TABLES, shards=SHARDS)


@pytest.fixture
async def racers(clients: list[Any]) -> list[DynamoDbConnectionStore]:
    """RACERS stores, each on its own client, each with a live session `racer-<i>`."""
    stores = [store_on(c) for c in clients[:RACERS]]
    for i, store in enumerate(stores):
        await store.open_session(racer_session(i), LONG, 100, T)
    return stores


@pytest.fixture
def owner(clients: list[Any]) -> DynamoDbConnectionStore:
    """The store of the worker whose session dies (a client of its own)."""
    return store_on(clients[RACERS])


async def acquire_race(
    racers: list[DynamoDbConnectionStore], cid: str, now_ms: int, expected_token: int
) -> str:
    """Every racer tries to take `cid` at once; exactly one may win, holding the new token."""
    won = await asyncio.gather(
        *(s.try_acquire(cid, racer_session(i), now_ms) for i, s in enumerate(racers))
    )
    winners = [racer_session(i) for i, conn in enumerate(won) if conn is not None]
    assert len(winners) == 1, f"{cid}: winners {winners}"
    stored = await racers[0].get(cid)
    assert stored is not None
    assert (stored.owner, stored.token) == (winners[0], expected_token)
    return winners[0]


async def owned_by_a_session_that_dies(
    owner: DynamoDbConnectionStore, cid: str, session: str
) -> None:
    """`cid` acquired at T by `session`, whose lease ends at T + LEASE."""
    await owner.start(cid, URL, T)
    await owner.open_session(session, LEASE, 10, T)
    assert await owner.try_acquire(cid, session, T) is not None


async def test_of_racing_acquirers_of_an_orphan_exactly_one_wins_every_round(
    racers: list[DynamoDbConnectionStore],
) -> None:
    for round_ in range(ROUNDS):
        cid = f"orphan-{round_}"
        await racers[0].start(cid, URL, T)
        winner = await acquire_race(racers, cid, T + 1, expected_token=1)
        acquired = [e for e in await racers[0].history(cid) if isinstance(e, LeaseAcquired)]
        assert [e.owner for e in acquired] == [winner]


async def test_of_racing_takeovers_from_a_dead_session_exactly_one_wins_every_round(
    racers: list[DynamoDbConnectionStore], owner: DynamoDbConnectionStore
) -> None:
    for round_ in range(ROUNDS):
        cid, dead = f"taken-{round_}", f"dead-{round_}"
        await owned_by_a_session_that_dies(owner, cid, dead)
        after = T + LEASE + 1  # the owner's session has just expired
        winner = await acquire_race(racers, cid, after, expected_token=2)
        taken = [e for e in await racers[0].history(cid) if isinstance(e, LeaseTakenOver)]
        assert [(e.owner, e.previous_owner) for e in taken] == [(winner, dead)]


@pytest.mark.parametrize("owner_clock", ["late", "behind"])
async def test_takeovers_racing_the_dead_owners_renew_leave_one_consistent_owner(
    racers: list[DynamoDbConnectionStore], owner: DynamoDbConnectionStore, owner_clock: str
) -> None:
    """The owner renews at the same moment as the racers take over, every round.
    - late: its renew comes after its session expired (by its own clock too): the renew is
      refused whatever the order, and exactly one racer takes over.
    - behind: its clock is 2 ms behind the racers', so to it the session is still live: its
      renew succeeds whatever the order; a takeover wins only if it committed before the renew
      (then the owner's token is fenced), else nobody takes the connection from a live session.
    """
    racers_now = T + LEASE + 1
    owner_now = racers_now if owner_clock == "late" else T + LEASE - 1
    takeovers = 0
    for round_ in range(ROUNDS):
        cid, session = f"renewing-{owner_clock}-{round_}", f"owner-{owner_clock}-{round_}"
        await owned_by_a_session_that_dies(owner, cid, session)

        renewal = asyncio.ensure_future(owner.renew_session(session, LEASE, 1, 10, owner_now))
        won = await asyncio.gather(
            *(s.try_acquire(cid, racer_session(i), racers_now) for i, s in enumerate(racers))
        )
        renewed = await renewal

        winners = [racer_session(i) for i, conn in enumerate(won) if conn is not None]
        stored = await owner.get(cid)
        assert stored is not None
        assert len(winners) <= 1, f"{cid}: winners {winners}"
        if owner_clock == "late":
            assert renewed is None
            assert len(winners) == 1
        else:
            assert isinstance(renewed, WorkerSession)
            assert renewed.expires_at_ms == owner_now + LEASE
        if winners:
            takeovers += 1
            assert (stored.owner, stored.token) == (winners[0], 2)
            # The old owner is fenced: its token no longer writes.
            assert not await owner.checkpoint(cid, session, 1, 5, owner_now)
        else:
            assert (stored.owner, stored.token) == (session, 1)
    if owner_clock == "late":
        assert takeovers == ROUNDS


def renew_once_all_have_decided(
    owner: DynamoDbConnectionStore, session: str, owner_now: int
) -> FaultyClient.Fault:
    """A transaction fault for every racer: the racers' transactions wait until all of them
    have read and decided; the last one to arrive lands the owner's renew first."""
    decided, renewed = 0, asyncio.Event()

    async def fault(call: Any, kwargs: dict[str, Any]) -> Any:
        nonlocal decided
        decided += 1
        if decided == RACERS:
            assert await owner.renew_session(session, LEASE, 1, 10, owner_now) is not None
            renewed.set()
        await renewed.wait()
        return await call(**kwargs)

    return fault


async def test_a_takeover_decided_before_the_owners_renew_landed_is_refused(
    clients: list[Any], owner: DynamoDbConnectionStore
) -> None:
    """The interleaving the dead-owner ConditionCheck exists for, forced every round: every
    racer reads the owner's session expired and decides on a takeover; then the owner's renew
    lands (its clock is behind: to it the session is live); then the racers' transactions run.
    None may win: the session they decided on is live again at their `now`."""
    racers_now, owner_now = T + LEASE + 1, T + LEASE - 1
    faulty = [FaultyClient(c) for c in clients[:RACERS]]
    racers = [store_on(f) for f in faulty]
    for i, store in enumerate(racers):
        await store.open_session(racer_session(i), LONG, 100, T)
    for round_ in range(ROUNDS):
        cid, session = f"interleaved-{round_}", f"owner-{round_}"
        await owned_by_a_session_that_dies(owner, cid, session)
        fault = renew_once_all_have_decided(owner, session, owner_now)
        for client in faulty:
            client.plan("transact_write_items", fault)

        won = await asyncio.gather(
            *(s.try_acquire(cid, racer_session(i), racers_now) for i, s in enumerate(racers))
        )

        assert [conn for conn in won if conn is not None] == [], f"round {round_}"
        stored = await owner.get(cid)
        assert stored is not None
        assert (stored.owner, stored.token) == (session, 1)
        assert [type(e) for e in await owner.history(cid)][-1] is LeaseAcquired


async def test_of_racing_stops_and_restarts_exactly_one_changes_it_every_round(
    racers: list[DynamoDbConnectionStore],
) -> None:
    cid = "switched"
    await racers[0].start(cid, URL, T)
    for round_ in range(ROUNDS):
        now = T + 10 * (round_ + 1)
        stops = await asyncio.gather(*(s.stop(cid, now) for s in racers))
        assert sum(r.changed for r in stops) == 1, f"round {round_}: STOPs that changed it"
        starts = await asyncio.gather(*(s.start(cid, URL, now + 5) for s in racers))
        assert sum(r.changed for r in starts) == 1, f"round {round_}: STARTs that changed it"
    history = await racers[0].history(cid)
    assert sum(isinstance(e, StopRequested) for e in history) == ROUNDS
    assert sum(isinstance(e, ConnectionRestarted) for e in history) == ROUNDS
