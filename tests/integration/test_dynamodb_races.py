"""Races on DynamoDB Local with nothing in front of it: N acquirers, each with a client (and a
connection pool) of its own, go for one connection at the same moment, round after round.
DynamoDB's conditional writes must leave exactly one winner every round: of an orphan, of a
takeover after expiry, of racing STOPs and of racing STARTs. moto cannot judge this (it is not
atomic, so the fallback serializes it and these tests would prove nothing there: they skip)."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.tables import create_tables
from domain import ConnectionRestarted, LeaseAcquired, LeaseTakenOver, StopRequested
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import TABLES, dynamodb_client

RACERS = 10
ROUNDS = 20
T = 1_700_000_000_000
LEASE = 20_000
URL = "wss://upstream.example/s"
SHARDS = 4


@pytest.fixture
async def racers(aws: LocalAws) -> AsyncIterator[list[DynamoDbConnectionStore]]:
    if not aws.on_dynamodb_local:
        pytest.skip(f"needs DynamoDB Local: {aws.fallback} (moto serializes every request)")
    async with AsyncExitStack() as stack:
        clients: list[Any] = [
            await stack.enter_async_context(dynamodb_client(aws)) for _ in range(RACERS)
        ]
        await create_tables(clients[0], TABLES, SHARDS)
        # One request each first, so every racer has an open connection when the race starts.
        await asyncio.gather(*(c.describe_table(TableName=TABLES.connections) for c in clients))
        yield [DynamoDbConnectionStore(c, tables=TABLES, shards=SHARDS) for c in clients]


async def acquire_race(
    racers: list[DynamoDbConnectionStore], cid: str, now_ms: int, expected_token: int
) -> str:
    """Every racer tries to take `cid` at once; exactly one may win, holding the new token."""
    won = await asyncio.gather(
        *(s.try_acquire(cid, f"w{i}", LEASE, now_ms) for i, s in enumerate(racers))
    )
    winners = [f"w{i}" for i, conn in enumerate(won) if conn is not None]
    assert len(winners) == 1, f"{cid}: winners {winners}"
    stored = await racers[0].get(cid)
    assert stored is not None
    assert (stored.owner, stored.token) == (winners[0], expected_token)
    return winners[0]


async def test_of_racing_acquirers_of_an_orphan_exactly_one_wins_every_round(
    racers: list[DynamoDbConnectionStore],
) -> None:
    for round_ in range(ROUNDS):
        cid = f"orphan-{round_}"
        await racers[0].start(cid, URL, T)
        winner = await acquire_race(racers, cid, T + 1, expected_token=1)
        acquired = [e for e in await racers[0].history(cid) if isinstance(e, LeaseAcquired)]
        assert [e.owner for e in acquired] == [winner]


async def test_of_racing_takeovers_after_expiry_exactly_one_wins_every_round(
    racers: list[DynamoDbConnectionStore],
) -> None:
    for round_ in range(ROUNDS):
        cid = f"expired-{round_}"
        await racers[0].start(cid, URL, T)
        assert await racers[0].try_acquire(cid, "dead", LEASE, T + 1) is not None
        after = T + 1 + LEASE + 1  # the dead owner's lease has just expired
        winner = await acquire_race(racers, cid, after, expected_token=2)
        taken = [e for e in await racers[0].history(cid) if isinstance(e, LeaseTakenOver)]
        assert [(e.owner, e.previous_owner) for e in taken] == [(winner, "dead")]


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
