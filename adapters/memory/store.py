"""InMemoryConnectionStore: the reference store. It runs the port's template (decide, fold,
write: application/ports/store_step.py) under one lock, so it has the domain's semantics by
construction; other stores are contract-tested against it."""

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from application.ports.store import check_page_size
from application.ports.store_step import (
    Change,
    SessionChange,
    SteppedStore,
    StoreStep,
    consulted_sessions,
)
from domain import (
    NO_OWNER,
    Command,
    Connection,
    DesiredState,
    Event,
    SessionCommand,
    SessionEvent,
    WorkerSession,
)
from domain.codec import for_the_log

T = TypeVar("T")


class InMemoryConnectionStore(SteppedStore):
    def __init__(self) -> None:
        self._states: dict[str, Connection] = {}
        self._sessions: dict[str, WorkerSession] = {}
        self._log: dict[str, list[Event]] = {}
        self._session_log: dict[str, list[SessionEvent]] = {}
        self._lock = asyncio.Lock()
        self.operations: dict[str, int] = {}  # operation name -> count, for tests and benches

    async def _atomically(
        self, command: Command | SessionCommand, run: Callable[[StoreStep], Coroutine[Any, Any, T]]
    ) -> T:
        async with self._lock:
            self._count(type(command).__name__)
            return await run(_Step(self))

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


class _Step(StoreStep):
    """The primitives on the store's dicts, under its lock."""

    def __init__(self, store: InMemoryConnectionStore) -> None:
        self._store = store

    async def load(self, command: Command) -> tuple[Connection | None, Mapping[str, WorkerSession]]:
        state = self._store._states.get(command.connection_id)
        sessions = self._store._sessions
        return state, {s: sessions[s] for s in consulted_sessions(command, state) if s in sessions}

    async def save(self, change: Change) -> None:
        self._store._states[change.after.connection_id] = change.after
        log = self._store._log.setdefault(change.after.connection_id, [])
        log.extend(for_the_log(e) for e in change.logged)

    async def load_session(self, command: SessionCommand) -> WorkerSession | None:
        return self._store._sessions.get(command.session_id)

    async def opened(self, session_id: str) -> Sequence[SessionEvent]:
        return self._store._session_log.get(session_id, [])[:1]

    async def save_session(self, change: SessionChange) -> None:
        self._store._sessions[change.after.session_id] = change.after
        self._store._session_log.setdefault(change.after.session_id, []).extend(change.logged)
