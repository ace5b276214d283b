"""Several OS processes share one SQLite file and race for the same leases, round after round."""

import asyncio
import multiprocessing
import queue
from collections import defaultdict
from pathlib import Path
from typing import Any

from adapters.sqlite.store import SqliteConnectionStore
from domain import LeaseAcquired, LeaseReleased, LeaseTakenOver
from tests.integration.sqlite_racer import URL, race

PROCESSES = 4
CONNECTIONS = [f"conn-{i:02d}" for i in range(12)]
ROUNDS = 5
TIMEOUT_S = 60.0


def _run_racers(db_path: Path) -> list[tuple[Any, ...]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    processes = [
        ctx.Process(
            target=race,
            args=(str(db_path), i, CONNECTIONS, ROUNDS, barrier, results),
            name=f"sqlite-racer-{i}",
        )
        for i in range(PROCESSES)
    ]
    for p in processes:
        p.start()
    received: list[tuple[Any, ...]] = []
    try:
        done = 0
        while done < PROCESSES:
            message = results.get(timeout=TIMEOUT_S)
            received.append(message)
            assert message[0] != "error", f"racer {message[1]} failed:\n{message[2]}"
            done += message[0] == "done"
    except queue.Empty:
        raise AssertionError(f"racers did not finish in {TIMEOUT_S}s: {received}") from None
    finally:
        for p in processes:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    assert [p.exitcode for p in processes] == [0] * PROCESSES
    return received


def test_processes_racing_on_one_file_get_exactly_one_winner_per_connection_per_round(
    tmp_path: Path,
) -> None:
    """GIVEN 4 processes opening one fresh database file at once
    WHEN they all START the same connections, then race to acquire every connection, round
    after round, releasing their wins between rounds; then one process takes every connection,
    its session ends, and the three others race to take them over while it heartbeats late
    THEN each START takes effect once, each round has exactly one winner per connection, the
    fencing token rises by one per change of owner, every takeover has exactly one winner and
    no late heartbeat is accepted, the dead session is forgotten once nothing names it, and no
    process sees 'database is locked'."""
    received = _run_racers(tmp_path / "fleet.sqlite")

    started = [cid for kind, _, *rest in received if kind == "started" for cid in rest[0]]
    assert sorted(started) == CONNECTIONS

    winners: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for kind, index, *rest in received:
        if kind == "won":
            round_, won = rest
            for cid, token in won:
                winners[(round_, cid)].append((index, token))
    for round_ in range(ROUNDS):
        for cid in CONNECTIONS:
            assert len(winners[(round_, cid)]) == 1, (round_, cid, winners[(round_, cid)])
            assert winners[(round_, cid)][0][1] == round_ + 1

    took_over: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for kind, index, *rest in received:
        if kind == "took_over":
            for cid, token in rest[0]:
                took_over[cid].append((index, token))
    for cid in CONNECTIONS:
        assert len(took_over[cid]) == 1, (cid, took_over[cid])
        assert took_over[cid][0][0] != 0
        assert took_over[cid][0][1] == ROUNDS + 2
    assert [rest for kind, _, *rest in received if kind == "late_renews"] == [[0]]
    assert [rest for kind, _, *rest in received if kind == "forgot"] == [[True]]

    asyncio.run(_assert_final_state(tmp_path / "fleet.sqlite"))


async def _assert_final_state(db_path: Path) -> None:
    async with SqliteConnectionStore.open(db_path) as store:
        for conn in await store.list_connections():
            assert (conn.owner, conn.token, conn.checkpoint_seq, conn.ws_url) == (
                "",
                ROUNDS + 2,
                ROUNDS + 1,
                URL,
            )
            history = await store.history(conn.connection_id)
            leases = [
                e for e in history if isinstance(e, LeaseAcquired | LeaseReleased | LeaseTakenOver)
            ]
            assert [(type(e), e.token) for e in leases] == [
                *(
                    (kind, token)
                    for token in range(1, ROUNDS + 1)
                    for kind in (LeaseAcquired, LeaseReleased)
                ),
                (LeaseAcquired, ROUNDS + 1),
                (LeaseTakenOver, ROUNDS + 2),
                (LeaseReleased, ROUNDS + 2),
            ]
            assert [e.version for e in history] == sorted(e.version for e in history)
