"""InMemoryConnectionStore: the reference store. It applies the domain's decide/evolve under
one lock, so it has the domain's semantics by construction; other stores are contract-tested
against it."""

import asyncio
from collections.abc import AsyncIterator, Sequence

from application.ports.store import CommandResult, ConnectionStore, SessionResult, check_page_size
from domain import (
    NO_OWNER,
    SESSION_LOG_EVENTS,
    Acquire,
    Command,
    Connection,
    DesiredState,
    Event,
    OpenSession,
    SessionCommand,
    SessionEvent,
    WorkerSession,
    decide,
    decide_session,
    fold,
    fold_session,
    is_ownership_event,
)
from domain.codec import for_the_log


class InMemoryConnectionStore(ConnectionStore):
    def __init__(self) -> None:
        self._states: dict[str, Connection] = {}
        self._sessions: dict[str, WorkerSession] = {}
        self._log: dict[str, list[Event]] = {}
        self._session_log: dict[str, list[SessionEvent]] = {}
        self._lock = asyncio.Lock()
        self.operations: dict[str, int] = {}  # operation name -> count, for tests and benches

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        async with self._lock:
            self._count(type(command).__name__)
            state = self._states.get(command.connection_id)
            sessions = self._sessions if isinstance(command, Acquire) else {}
            events = decide(state, command, now_ms, sessions)
            if not events:
                if state is None:  # decide never returns no events for an unknown connection
                    raise AssertionError("no events for an unknown connection")
                return CommandResult(state, False)
            new_state = fold(events, state)
            assert new_state is not None
            self._states[command.connection_id] = new_state
            self._log.setdefault(command.connection_id, []).extend(
                for_the_log(e) for e in events if is_ownership_event(e)
            )
            return CommandResult(new_state, True, tuple(events))

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        async with self._lock:
            self._count(type(command).__name__)
            state = self._sessions.get(command.session_id)
            if state is None and isinstance(command, OpenSession):
                # A forgotten session's log outlives it: an id is never opened twice.
                state = fold_session(self._session_log.get(command.session_id, [])[:1])
            events = decide_session(state, command, now_ms)
            if not events:
                assert state is not None
                return SessionResult(state, False)
            new_state = fold_session(events, state)
            assert new_state is not None
            self._sessions[command.session_id] = new_state
            self._session_log.setdefault(command.session_id, []).extend(
                e for e in events if isinstance(e, SESSION_LOG_EVENTS)
            )
            return SessionResult(new_state, True)

    async def get(self, connection_id: str) -> Connection | None:
        self._count("get")
        return self._states.get(connection_id)

    async def get_session(self, session_id: str) -> WorkerSession | None:
        self._count("get_session")
        return self._sessions.get(session_id)

    async def list_sessions(self) -> Sequence[WorkerSession]:
        self._count("list_sessions")
        return [self._sessions[k] for k in sorted(self._sessions)]

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        self._count("iter_orphans")
        check_page_size(page_size)
        orphans = [c for c in self._states.values() if c.is_orphan(now_ms, self._sessions)]
        for i in range(0, len(orphans), page_size):
            yield orphans[i : i + page_size]

    async def next_available_at(self, now_ms: int) -> int | None:
        self._count("next_available_at")
        times = [
            c.not_before_ms
            for c in self._states.values()
            if c.desired_state is DesiredState.STARTED
            and c.owner == NO_OWNER
            and c.not_before_ms >= now_ms
        ]
        return min(times, default=None)

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        self._count("stop_requested")
        return sorted(
            c.connection_id
            for c in self._states.values()
            if c.stop_pending and c.owner == session_id
        )

    async def owned_by(self, session_id: str) -> Sequence[str]:
        self._count("owned_by")
        if session_id == NO_OWNER:
            return []  # "no owner" is nobody's session
        return sorted(c.connection_id for c in self._states.values() if c.owner == session_id)

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        async with self._lock:
            self._count("forget_session")
            session = self._sessions.get(session_id)
            if session is None or session.is_live(now_ms):
                return False
            if any(c.owner == session_id for c in self._states.values()):
                return False
            del self._sessions[session_id]
            return True

    async def history(self, connection_id: str) -> Sequence[Event]:
        self._count("history")
        return list(self._log.get(connection_id, []))

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        self._count("session_history")
        return list(self._session_log.get(session_id, []))

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        return [self._states[k] for k in sorted(self._states)[:limit]]

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1
