"""Builders for the domain tests: connections and worker sessions in a known state, driven at
explicit instants.

The clock of a pure domain is just an integer, so every helper takes `now_ms` explicitly. A
connection's lease is held while its owner's session is live, so the sessions a decision may
consult are an argument too: `LIVE` has s1, s2 and s3 opened at T0 and live until
T0 + SESSION_MS inclusive.
"""

from domain import (
    Acquire,
    Checkpoint,
    Command,
    Connection,
    EndSession,
    Event,
    OpenSession,
    RenewSession,
    SessionCommand,
    SessionEvent,
    SessionLookup,
    Start,
    WorkerSession,
    decide,
    decide_session,
    fold,
    fold_session,
)

CID = "conn-1"
URL = "wss://feeds.example.com/a"
OTHER_URL = "wss://feeds.example.com/b"
SESSION_MS = 10_000
CAPACITY = 100
T0 = 1_000_000
EXPIRY = T0 + SESSION_MS  # the last instant at which a session opened at T0 is live


def run(
    state: Connection | None, command: Command, now_ms: int, sessions: SessionLookup | None = None
) -> tuple[Connection, list[Event]]:
    """Decide and evolve one command; the new state and the events that made it."""
    events = decide(state, command, now_ms, LIVE if sessions is None else sessions)
    new_state = fold(events, state)
    assert new_state is not None
    return new_state, events


def run_session(
    state: WorkerSession | None, command: SessionCommand, now_ms: int
) -> tuple[WorkerSession, list[SessionEvent]]:
    events = decide_session(state, command, now_ms)
    new_state = fold_session(events, state)
    assert new_state is not None
    return new_state, events


def opened(session_id: str, now_ms: int = T0, lease_ms: int = SESSION_MS) -> WorkerSession:
    """A session opened at `now_ms`, live until now_ms + lease_ms inclusive."""
    return run_session(None, OpenSession(session_id, lease_ms, CAPACITY), now_ms)[0]


def renewed(session: WorkerSession, now_ms: int, lease_ms: int = SESSION_MS) -> WorkerSession:
    return run_session(session, RenewSession(session.session_id, lease_ms, 0, CAPACITY), now_ms)[0]


def ended(session: WorkerSession, now_ms: int = T0 + 1, reason: str = "exited") -> WorkerSession:
    return run_session(session, EndSession(session.session_id, reason), now_ms)[0]


def sessions(*states: WorkerSession) -> dict[str, WorkerSession]:
    return {s.session_id: s for s in states}


def live_at(now_ms: int, *session_ids: str) -> dict[str, WorkerSession]:
    """Sessions opened at `now_ms` (so live then): a fleet seen at a later instant."""
    return sessions(*(opened(sid, now_ms) for sid in session_ids))


LIVE: SessionLookup = live_at(T0, "s1", "s2", "s3")


def started(now_ms: int = T0, url: str = URL) -> Connection:
    return run(None, Start(CID, url), now_ms)[0]


def leased(owner: str = "s1", now_ms: int = T0) -> Connection:
    """Started and acquired by session `owner` (live in `LIVE`) at `now_ms`."""
    return run(started(now_ms), Acquire(CID, owner), now_ms)[0]


def checkpointed(seq: int, owner: str = "s1", now_ms: int = T0) -> Connection:
    """Leased by `owner` at `now_ms`, which checkpointed `seq` at once."""
    conn = leased(owner, now_ms)
    return run(conn, Checkpoint(CID, owner, conn.token, seq), now_ms)[0]
