"""Builders for the domain tests: a connection in a known state, driven at explicit instants.

The clock of a pure domain is just an integer, so every helper takes `now_ms` explicitly.
"""

from domain import Acquire, Command, Connection, Event, Renew, Start, decide, fold

CID = "conn-1"
URL = "wss://feeds.example.com/a"
OTHER_URL = "wss://feeds.example.com/b"
LEASE_MS = 10_000
T0 = 1_000_000


def run(state: Connection | None, command: Command, now_ms: int) -> tuple[Connection, list[Event]]:
    """Decide and evolve one command; the new state and the events that made it."""
    events = decide(state, command, now_ms)
    new_state = fold(events, state)
    assert new_state is not None
    return new_state, events


def started(now_ms: int = T0, url: str = URL) -> Connection:
    return run(None, Start(CID, url), now_ms)[0]


def leased(worker: str = "w1", now_ms: int = T0, lease_ms: int = LEASE_MS) -> Connection:
    """Started and acquired by `worker` at `now_ms`, lease ending at now_ms + lease_ms."""
    return run(started(now_ms), Acquire(CID, worker, lease_ms), now_ms)[0]


def checkpointed(seq: int, worker: str = "w1", now_ms: int = T0) -> Connection:
    """Leased by `worker` at `now_ms`, which renewed at once recording `seq`."""
    conn = leased(worker, now_ms)
    return run(conn, Renew(CID, worker, conn.token, LEASE_MS, seq), now_ms)[0]
