"""IndexedMemoryStore: the reference in-memory store, with the indexes DynamoDB has.

The reference store answers every query by looking at every connection: right for a test of a
few, but at 100,000 connections a fleet of 1,000 workers asking for its STOPs every 2 s would
spend the simulation's whole wall time there. This store keeps the reference's commands
(decide/evolve under one lock, inherited unchanged) and answers the queries from indexes kept
beside the state, the ones the DynamoDB store has (adapters/dynamodb/schema.py): connections
by owner, STOPPED ones by owner, and unowned STARTED ones. Same answers, other cost."""

from collections.abc import AsyncIterator, Sequence

from adapters.memory.store import InMemoryConnectionStore
from application.ports.store import CommandResult, SessionResult, check_page_size
from domain import NO_OWNER, Command, Connection, DesiredState, SessionCommand, WorkerSession


class IndexedMemoryStore(InMemoryConnectionStore):
    def __init__(self) -> None:
        super().__init__()
        self.by_owner: dict[str, set[str]] = {}  # session id -> connections it owns
        self._stops: dict[str, set[str]] = {}  # session id -> its STOPPED, still owned
        self.unowned: set[str] = set()  # STARTED with no owner (back-off or not)
        self._sorted_sessions: list[str] | None = None

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        before = self._states.get(command.connection_id)
        result = await super().execute(command, now_ms)
        if result.changed:
            self._reindex(before, result.connection)
        return result

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        known = command.session_id in self._sessions
        result = await super().execute_session(command, now_ms)
        if not known:
            self._sorted_sessions = None
        return result

    def _reindex(self, before: Connection | None, after: Connection) -> None:
        cid = after.connection_id
        if before is not None and before.owner != NO_OWNER:
            self.by_owner.get(before.owner, set()).discard(cid)
            self._stops.get(before.owner, set()).discard(cid)
        self.unowned.discard(cid)
        if after.owner != NO_OWNER:
            self.by_owner.setdefault(after.owner, set()).add(cid)
            if after.stop_pending:
                self._stops.setdefault(after.owner, set()).add(cid)
        elif after.desired_state is DesiredState.STARTED:
            self.unowned.add(cid)

    def session_ids(self) -> list[str]:
        if self._sorted_sessions is None:
            self._sorted_sessions = sorted(self._sessions)
        return self._sorted_sessions

    async def list_sessions(self) -> Sequence[WorkerSession]:
        self._count("list_sessions")
        return [self._sessions[k] for k in self.session_ids()]

    def orphan_candidates(self, now_ms: int) -> tuple[list[str], list[str]]:
        """(unowned past their back-off, owned by a session that is not live): what the
        DynamoDB store reads from its orphan index and its owner index respectively."""
        unowned = [c for c in self.unowned if self._states[c].not_before_ms <= now_ms]
        dead = [
            cid
            for sid, owned in self.by_owner.items()
            if owned and not self._live(sid, now_ms)
            for cid in owned
        ]
        return unowned, dead

    def _live(self, session_id: str, now_ms: int) -> bool:
        session = self._sessions.get(session_id)
        return session is not None and session.is_live(now_ms)

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        self._count("iter_orphans")
        check_page_size(page_size)
        unowned, dead = self.orphan_candidates(now_ms)
        orphans = [
            c
            for c in (self._states[cid] for cid in dead + unowned)
            if c.is_orphan(now_ms, self._sessions)
        ]
        for i in range(0, len(orphans), page_size):
            yield orphans[i : i + page_size]

    async def next_available_at(self, now_ms: int) -> int | None:
        self._count("next_available_at")
        times = [t for t in (self._states[c].not_before_ms for c in self.unowned) if t >= now_ms]
        return min(times, default=None)

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        self._count("stop_requested")
        return sorted(self._stops.get(session_id, ()))

    async def owned_by(self, session_id: str) -> Sequence[str]:
        self._count("owned_by")
        if session_id == NO_OWNER:
            return []
        return sorted(self.by_owner.get(session_id, ()))

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        async with self._lock:
            self._count("forget_session")
            session = self._sessions.get(session_id)
            if session is None or session.is_live(now_ms) or self.by_owner.get(session_id):
                return False
            del self._sessions[session_id]
            self.by_owner.pop(session_id, None)
            self._stops.pop(session_id, None)
            self._sorted_sessions = None
            return True
