"""The lease store's DynamoDB costs (suite `store-cost`), counted at the adapter boundary by
bench/units.py on DynamoDB Local, with nothing but the store (no worker, no queue):

- every store operation once, with its requests and units, in an order that makes each the
  case it is named for;
- one worker-hour of the worker's periodic store calls at the default intervals (the heartbeat,
  the STOP check, each at its interval in WorkerConfig; a reconciliation pass at its interval,
  and again at the cadence the worker's loop actually keeps) while the worker's session owns
  10, 100 and 10,000 connections: what grows with connections shows (nothing should: those
  calls read items and indexes that do not list held connections);
- checkpoint writes (a sink without a resume point) priced per checkpoint and multiplied, not
  run at 10,000 connections.

Time is simulated (`now_ms` steps through the hour), so an hour takes seconds.
"""

import functools
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from adapters.dynamodb import schema
from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.items import connection_to_item
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from application.config import WorkerConfig
from application.ports import ConnectionStore
from bench.units import Meter, MeteringClient
from domain import Connection, DesiredState
from entrypoints.devstack.aws import LocalAws, open_local_aws
from entrypoints.devstack.aws import client as aws_client

STEADY_COUNTS = (10, 100, 10_000)


@asynccontextmanager
async def local_dynamodb(log_dir: Path, name: str) -> AsyncIterator[tuple[Any, str, LocalAws]]:
    """A fresh DynamoDB (the dev stack's: DynamoDB Local when installed) with the tables, a
    description of its engine, and the stack (moto beside it). Logs under log_dir / name."""
    async with AsyncExitStack() as stack:
        aws = await stack.enter_async_context(open_local_aws(log_dir / name))
        client = await stack.enter_async_context(aws_client("dynamodb", aws.dynamodb_url))
        await create_tables(client)
        yield client, aws.describe(), aws


T0 = 1_700_000_000_000
URL = "wss://upstream.example/feed"


async def _measure(meter: Meter, call: Awaitable[Any]) -> dict[str, Any]:
    meter.clear()
    await call
    return {
        "requests": dict(sorted(meter.requests.items())),
        "rru": round(meter.total_rcu, 2),
        "wru": round(meter.total_wcu, 2),
        "wru_by_target": {k: v for k, v in sorted(meter.wcu.items())},
    }


async def _orphans(store: ConnectionStore, now_ms: int) -> int:
    return sum([len(page) async for page in store.iter_orphans(now_ms, 100)])


Measure = Callable[[Awaitable[Any]], Awaitable[dict[str, Any]]]


async def per_operation(store: ConnectionStore, measure: Measure) -> dict[str, Any]:
    """Each store operation once, in an order that makes each the case named; `measure(call)`
    awaits the call and says what it cost."""
    lease = WorkerConfig().lease_ms
    ops: dict[str, Any] = {}

    async def m(name: str, call: Awaitable[Any]) -> None:
        ops[name] = await measure(call)

    await m("open_session", store.open_session("s1", lease, 100, T0))
    await store.open_session("s2", 100 * lease, 100, T0)
    await m("start (new)", store.start("c1", URL, T0))
    await m("start (repeated)", store.start("c1", URL, T0 + 1))
    await m("try_acquire (orphan)", store.try_acquire("c1", "s1", T0 + 1))
    await m("try_acquire (refused: held)", store.try_acquire("c1", "s2", T0 + 2))
    await m("renew_session (heartbeat)", store.renew_session("s1", lease, 1, 100, T0 + 1_000))
    await m("checkpoint", store.checkpoint("c1", "s1", 1, 10, T0 + 1_001))
    await m("stop_requested", store.stop_requested("s1"))
    await m("iter_orphans (none dead)", _orphans(store, T0 + 1_002))
    await m("next_available_at", store.next_available_at(T0 + 1_002))
    await m("release (with a final checkpoint)", store.release("c1", "s1", 1, 20, T0 + 1_003))
    await store.try_acquire("c1", "s1", T0 + 1_004)
    dead_at = T0 + 1_000 + lease + 1
    await m("iter_orphans (one dead session, 1 connection)", _orphans(store, dead_at))
    await m("try_acquire (takeover)", store.try_acquire("c1", "s2", dead_at))
    await m("stop (owned)", store.stop("c1", dead_at + 1))
    await m("release (STOP honoured)", store.release("c1", "s2", 3, 20, dead_at + 2))
    await m("start (restart)", store.start("c1", URL, dead_at + 3))
    await store.try_acquire("c1", "s2", dead_at + 4)
    await m("end_stream", store.end_stream("c1", "s2", 4, 21, dead_at + 5))
    await m("note_expiry", store.note_expiry("s1", "s2", dead_at + 6))
    await m("note_expiry (already noted)", store.note_expiry("s1", "s2", dead_at + 6))
    await m("end_session", store.end_session("s2", "shutdown", dead_at + 6))
    await m("forget_session", store.forget_session("s1", dead_at + 7))
    assert await store.forget_session("s2", dead_at + 8)  # no dead session lingers below
    await m("get", store.get("c1"))
    await m("get_session", store.get_session("s2"))
    return ops


def held_by(session: str, count: int) -> list[Connection]:
    """`count` STARTED connections owned by `session`: what a steady worker holds (each
    backend's suite writes them directly, as setup that is not counted)."""
    return [
        Connection(
            connection_id=f"held-{session}-{i:05d}",
            version=2,
            desired_state=DesiredState.STARTED,
            ws_url=URL,
            owner=session,
            token=1,
            updated_at_ms=T0,
        )
        for i in range(count)
    ]


async def _own(client: Any, session: str, count: int) -> None:
    """`count` STARTED connections owned by `session`, written directly (unmetered setup)."""
    table = TableNames().connections
    items = [
        connection_to_item(conn, schema.DEFAULT_ORPHAN_SHARDS) for conn in held_by(session, count)
    ]
    for i in range(0, len(items), 25):
        requests: list[Any] = [{"PutRequest": {"Item": item}} for item in items[i : i + 25]]
        while requests:
            response = await client.batch_write_item(RequestItems={table: requests})
            requests = response.get("UnprocessedItems", {}).get(table, [])


async def steady_worker_hour(
    client: Any, store: DynamoDbConnectionStore, meter: Meter, connections: int, cadence: str
) -> dict[str, Any]:
    """One worker-hour of the periodic store calls at the default intervals, the worker's
    session owning `connections` (nothing dies, nothing is stopped: steady state).

    `cadence` of reconciliation: "interval" = a full pass (iter_orphans, next_available_at)
    every `reconcile_interval_s` and nothing else; "worker" = the rule of
    application/worker/loops.py's `reconcile`: the same full pass every interval, plus a watch
    of the sessions (list_sessions) at least once a lease, plus the mean jitter (alone in the
    fleet, no other session's expiry comes sooner; nothing dies, so no extra full pass)."""
    config = WorkerConfig()
    session = f"steady-{cadence}-{connections}"
    await store.open_session(session, config.lease_ms, connections, T0)
    await _own(client, session, connections)
    meter.clear()
    calls = await periodic_calls(store, session, connections, cadence)
    return {
        "connections": connections,
        "reconcile_cadence": cadence,
        "calls_per_worker_hour": dict(calls),
        "requests_per_worker_hour": dict(sorted(meter.requests.items())),
        "wru_per_worker_hour": round(meter.total_wcu, 1),
        "rru_per_worker_hour": round(meter.total_rcu, 1),
        "wru_per_connection_hour": round(meter.total_wcu / connections, 4),
        "rru_per_connection_hour": round(meter.total_rcu / connections, 4),
        "wru_by_target": {k: round(v, 1) for k, v in sorted(meter.wcu.items())},
        "rru_by_target": {k: round(v, 1) for k, v in sorted(meter.rcu.items())},
    }


async def periodic_calls(
    store: ConnectionStore, session: str, connections: int, cadence: str
) -> Counter[str]:
    """One simulated worker-hour of a worker's periodic store calls at the default intervals
    (see steady_worker_hour for `cadence`), its session `session` (opened at T0) owning
    `connections`: the calls made, by activity. Any store: the postgres suite runs it too."""
    config = WorkerConfig()
    jitter_ms = int(config.reconcile_jitter_s * 1000 / 2)
    interval_ms = {
        "renew_session": int(config.heartbeat_interval_s * 1000),
        "stop_requested": int(config.desired_state_interval_s * 1000),
        "full_scan": int(config.reconcile_interval_s * 1000),
        "watch": config.lease_ms + jitter_ms,
    }
    due = {"renew_session": T0 + interval_ms["renew_session"], "stop_requested": T0 + 1}
    due["full_scan"] = T0 + 1
    if cadence == "worker":
        due["watch"] = T0 + 1 + interval_ms["watch"]
    calls: Counter[str] = Counter()
    end = T0 + 3_600_000
    while (now := min(due.values())) < end:
        activity = min(due, key=lambda a: due[a])
        calls[activity] += 1
        if activity == "renew_session":
            renewed = await store.renew_session(
                session, config.lease_ms, connections, connections, now
            )
            assert renewed is not None, "the session expired during the steady-state hour"
        elif activity == "stop_requested":
            assert await store.stop_requested(session) == []
        elif activity == "watch":
            await store.list_sessions()
        else:
            if cadence == "worker":
                await store.list_sessions()  # the watch's read that precedes a full pass
            await _orphans(store, now)
            await store.next_available_at(now)
        due[activity] = now + interval_ms[activity]
    return calls


async def run_store_cost(log_dir: Path, counts: Sequence[int] = STEADY_COUNTS) -> dict[str, Any]:
    config = WorkerConfig()
    async with local_dynamodb(log_dir, "store-cost-aws") as (client, engine, _):
        meter = Meter()
        metered: Any = MeteringClient(client, meter)
        store = DynamoDbConnectionStore(metered)
        operations = await per_operation(store, functools.partial(_measure, meter))
        steady = [
            await steady_worker_hour(client, store, meter, n, cadence)
            for cadence in ("interval", "worker")
            for n in counts
        ]
    checkpoint_wru = operations["checkpoint"]["wru"]
    return {
        "engine": engine,
        "defaults": {
            "lease_ms": config.lease_ms,
            "heartbeat_interval_s": config.heartbeat_interval_s,
            "stop_check_interval_s": config.desired_state_interval_s,
            "reconcile_interval_s": config.reconcile_interval_s,
            "reconcile_jitter_s": config.reconcile_jitter_s,
            "orphan_shards": schema.DEFAULT_ORPHAN_SHARDS,
        },
        "per_operation": operations,
        "steady_state": steady,
        # A sink without a resume point: one checkpoint per connection per interval (priced
        # from the measured checkpoint, not run at 10,000 connections).
        "checkpoint_wru_per_connection_hour": {
            f"every {s} s": round(checkpoint_wru * 3600 / s, 1) for s in (10, 30, 60, 300)
        },
    }
