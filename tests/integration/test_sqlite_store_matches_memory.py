"""Differential test: the SQLite store answers long random command sequences exactly as the
reference in-memory store does (results, refusals with their messages, final states,
histories, and every query: orphans, wake-up time, sessions, STOPs).

A seeded random walk rather than Hypothesis: reaching deep lease states needs commands aimed at
the current owner and token, with explicit weights; each seed is a reproducible plan and a
failure names the seed, the step and the command.
"""

import random
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.store import InMemoryConnectionStore
from adapters.sqlite.store import SqliteConnectionStore
from domain import DomainError

IDS = ["conn-a", "conn-b", "bad id"]
URLS = ["wss://one.example/s", "wss://two.example/s", "http://not-ws.example/"]
START_MS = 1_700_000_000_000
STEPS = 400
LEASES = [5_000, 1_000, -1]

# Weights: mostly holding leases and keeping sessions alive, with every other command mixed in.
COMMANDS = {
    "try_acquire": 6,
    "checkpoint": 4,
    "release": 1,
    "end_stream": 1,
    "report_upstream_failure": 1,
    "start": 2,
    "stop": 1,
    "get": 1,
    "open_session": 2,
    "renew_session": 8,
    "end_session": 1,
    "forget_session": 1,
    "get_session": 1,
}


async def _random_command(
    rnd: random.Random, reference: InMemoryConnectionStore, sessions: list[str]
) -> list[Any]:
    """A command aimed, most of the time, at the connection's current owner, token and
    checkpoint, or at a recent session, so that it can succeed; otherwise at someone else, a
    stale token or a long-dead session."""
    cid = rnd.choices(IDS, [6, 3, 1])[0]
    state = await reference.get(cid)
    recent = rnd.choice(sessions[-2:])
    owner = state.owner if state and state.owner and rnd.random() < 0.7 else recent
    sid = owner if rnd.random() < 0.8 else rnd.choice([*sessions, "never-opened", ""])
    token = state.token if state and rnd.random() < 0.8 else rnd.randint(0, 3)
    seq = (state.checkpoint_seq if state else 0) + rnd.choice([0, 1, 1, 2, -1])
    lease_ms = rnd.choices(LEASES, [6, 2, 1])[0]
    name = rnd.choices(list(COMMANDS), list(COMMANDS.values()))[0]
    fresh = f"session-{len(sessions)}" if rnd.random() < 0.8 else rnd.choice(sessions)
    commands: dict[str, list[Any]] = {
        "try_acquire": [name, cid, sid],
        "checkpoint": [name, cid, sid, token, seq],
        "release": [name, cid, sid, token, seq],
        "end_stream": [name, cid, sid, token, seq],
        "report_upstream_failure": [name, cid, sid, token, seq, rnd.randint(0, 8_000)],
        "start": [name, cid, rnd.choices(URLS, [8, 1, 1])[0]],
        "stop": [name, cid],
        "get": [name, cid],
        "open_session": [name, fresh, lease_ms, rnd.randint(0, 3)],
        "renew_session": [name, recent, lease_ms, rnd.randint(0, 3), 3],
        "end_session": [name, sid, "leaving"],
        "forget_session": [name, rnd.choice(sessions)],
        "get_session": [name, sid],
    }
    return commands[name]


async def _outcome(store: Any, command: list[Any], now_ms: int) -> object:
    name, *args = command
    if name == "report_upstream_failure":
        args = [*args[:-1], now_ms + args[-1], "upstream kept failing"]
    try:
        if name in ("get", "get_session"):
            return await getattr(store, name)(*args)
        return await getattr(store, name)(*args, now_ms)
    except DomainError as exc:
        return (type(exc).__name__, str(exc))


def _succeeded(outcome: object) -> bool:
    return outcome not in (None, False) and not isinstance(outcome, tuple)


async def _snapshot(store: Any, now_ms: int, sessions: list[str]) -> object:
    orphans = [c.connection_id async for page in store.iter_orphans(now_ms, 1) for c in page]
    return (
        await store.list_connections(),
        [await store.history(cid) for cid in IDS],
        sorted(orphans),
        await store.next_available_at(now_ms),
        await store.list_sessions(),
        [await store.session_history(sid) for sid in sessions],
        [await store.stop_requested(sid) for sid in sessions],
    )


@pytest.mark.parametrize("seed", range(20))
async def test_sqlite_store_decides_every_command_like_the_reference(
    seed: int, tmp_path: Path
) -> None:
    rnd = random.Random(seed)
    reference = InMemoryConnectionStore()
    succeeded: dict[str, int] = {}
    sessions = ["session-0"]
    async with SqliteConnectionStore.open(tmp_path / "diff.sqlite", synchronous="OFF") as store:
        now = START_MS
        for cid in IDS[:2]:  # both exist from the start, so most commands reach the lease logic
            await reference.start(cid, URLS[0], now)
            await store.start(cid, URLS[0], now)
        for s in (reference, store):
            await s.open_session(sessions[0], LEASES[0], 3, now)
        for step in range(STEPS):
            now += rnd.choices([0, 10, 400, 1_500, 6_000], [1, 5, 4, 2, 1])[0]
            command = await _random_command(rnd, reference, sessions)
            expected = await _outcome(reference, command, now)
            assert await _outcome(store, command, now) == expected, (seed, step, command)
            if _succeeded(expected):
                succeeded[command[0]] = succeeded.get(command[0], 0) + 1
                if command[0] == "open_session":
                    sessions.append(command[1])
            if step % 7 == 3:
                # A survivor noting an expiry, drawn from nothing random: every seed's walk
                # stays the one its coverage was checked on.
                noted = ["note_expiry", sessions[step % len(sessions)], sessions[-1]]
                expected = await _outcome(reference, noted, now)
                assert await _outcome(store, noted, now) == expected, (seed, step, noted)
            if step % 25 == 0:
                assert await _snapshot(store, now, sessions) == await _snapshot(
                    reference, now, sessions
                ), (seed, step)
        assert await _snapshot(store, now, sessions) == await _snapshot(reference, now, sessions), (
            seed
        )
    # The walk went deep: leases were held, checkpointed and given back, sessions kept alive.
    assert set(succeeded) >= {"try_acquire", "checkpoint", "renew_session", "open_session"}, (
        succeeded
    )
