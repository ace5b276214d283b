"""The child side of test_sqlite_multiprocess: one OS process, one store, racing the others.

Run through multiprocessing's spawn context; every phase starts at a shared barrier so the
processes hit the database file at the same instant. Results and failures go to `results`.
Each process is one worker session, `worker-<index>`.
"""

import asyncio
import random
import traceback
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock

URL = "wss://upstream.example/stream"
SESSION_LEASE_MS = 60_000
BARRIER_TIMEOUT_S = 20.0


def race(
    db_path: str,
    index: int,
    connection_ids: list[str],
    rounds: int,
    barrier: Barrier,
    results: "Queue[tuple[Any, ...]]",
) -> None:
    try:
        asyncio.run(_race(db_path, index, connection_ids, rounds, barrier, results))
    except BaseException:
        results.put(("error", index, traceback.format_exc()))
        barrier.abort()  # the others fail fast instead of waiting for the timeout
        raise


async def _race(
    db_path: str,
    index: int,
    connection_ids: list[str],
    rounds: int,
    barrier: Barrier,
    results: "Queue[tuple[Any, ...]]",
) -> None:
    worker = f"worker-{index}"
    clock = SystemClock()
    order = random.Random(index)

    async def together() -> None:
        await asyncio.to_thread(barrier.wait, BARRIER_TIMEOUT_S)

    await together()  # every process opens the fresh file at once (WAL switch, schema)
    async with SqliteConnectionStore.open(db_path) as store:
        await store.open_session(worker, SESSION_LEASE_MS, len(connection_ids), clock.now_ms())
        await together()
        started = await asyncio.gather(
            *(store.start(cid, URL, clock.now_ms()) for cid in connection_ids)
        )
        results.put(("started", index, [r.connection.connection_id for r in started if r.changed]))
        for round_ in range(rounds):
            await together()
            mine = order.sample(connection_ids, len(connection_ids))
            leases = await asyncio.gather(
                *(store.try_acquire(cid, worker, clock.now_ms()) for cid in mine)
            )
            won = [(c.connection_id, c.token) for c in leases if c is not None]
            results.put(("won", index, round_, won))
            await together()  # everyone has tried before anyone releases
            await _release(store, worker, won, round_ + 1, clock.now_ms())
        # Takeover: worker-0 takes everything and dies (its session ended); the others race
        # for its connections while it heartbeats late, from another process.
        await together()
        if index == 0:
            for cid in connection_ids:
                assert await store.try_acquire(cid, worker, clock.now_ms()) is not None
        await together()
        if index == 0:
            assert await store.end_session(worker, "killed", clock.now_ms())
        await together()
        if index == 0:
            renewed = await asyncio.gather(
                *(
                    store.renew_session(worker, SESSION_LEASE_MS, 0, 1, clock.now_ms())
                    for _ in connection_ids
                )
            )
            results.put(("late_renews", index, sum(r is not None for r in renewed)))
        won = []
        if index != 0:
            mine = order.sample(connection_ids, len(connection_ids))
            leases = await asyncio.gather(
                *(store.try_acquire(cid, worker, clock.now_ms()) for cid in mine)
            )
            won = [(c.connection_id, c.token) for c in leases if c is not None]
            results.put(("took_over", index, won))
        await together()  # everyone has tried before anyone releases
        await _release(store, worker, won, rounds + 1, clock.now_ms())
        await together()
        if index == 0:
            results.put(("forgot", index, await store.forget_session(worker, clock.now_ms())))
        results.put(("done", index, dict(store.operations)))


async def _release(
    store: SqliteConnectionStore, worker: str, won: list[tuple[str, int]], seq: int, now: int
) -> None:
    await asyncio.gather(*(store.release(cid, worker, token, seq, now) for cid, token in won))
