"""InMemoryConnectionStore: the reference store. It applies domain.decide/evolve atomically,
so it has the domain's semantics by construction; other stores are contract-tested against it."""

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence

from application.ports.store import CommandResult, RenewResult
from domain import (
    Acquire,
    Command,
    Connection,
    DesiredState,
    DomainError,
    EndStream,
    Event,
    Release,
    Renew,
    ReportUpstreamFailure,
    Start,
    Stop,
    decide,
    fold,
    is_ownership_event,
)


class InMemoryConnectionStore:
    def __init__(self) -> None:
        self._states: dict[str, Connection] = {}
        self._log: dict[str, list[Event]] = {}
        self._lock = asyncio.Lock()
        self.operations: dict[str, int] = {}  # operation name -> count, for tests and benches

    async def _apply(self, command: Command, now_ms: int, op: str) -> tuple[Connection, bool]:
        async with self._lock:
            self.operations[op] = self.operations.get(op, 0) + 1
            state = self._states.get(command.connection_id)
            events = decide(state, command, now_ms)
            if not events:
                assert state is not None
                return state, False
            new_state = fold(events, state)
            assert new_state is not None
            self._states[command.connection_id] = new_state
            self._log.setdefault(command.connection_id, []).extend(
                e for e in events if is_ownership_event(e)
            )
            return new_state, True

    async def start(self, connection_id: str, ws_url: str, now_ms: int) -> CommandResult:
        conn, changed = await self._apply(Start(connection_id, ws_url), now_ms, "start")
        return CommandResult(conn, changed)

    async def stop(self, connection_id: str, now_ms: int) -> CommandResult:
        conn, changed = await self._apply(Stop(connection_id), now_ms, "stop")
        return CommandResult(conn, changed)

    async def get(self, connection_id: str) -> Connection | None:
        self._count("get")
        return self._states.get(connection_id)

    async def try_acquire(
        self, connection_id: str, worker_id: str, lease_ms: int, now_ms: int
    ) -> Connection | None:
        try:
            cmd = Acquire(connection_id, worker_id, lease_ms)
            return (await self._apply(cmd, now_ms, "try_acquire"))[0]
        except DomainError:
            return None

    async def renew(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        lease_ms: int,
        checkpoint_seq: int,
        now_ms: int,
    ) -> RenewResult:
        cmd = Renew(connection_id, worker_id, token, lease_ms, checkpoint_seq)
        try:
            return RenewResult(True, (await self._apply(cmd, now_ms, "renew"))[0])
        except DomainError:
            return RenewResult(False, self._states.get(connection_id))

    async def release(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        cmd = Release(connection_id, worker_id, token, checkpoint_seq)
        return (await self._apply(cmd, now_ms, "release"))[0]

    async def end_stream(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        cmd = EndStream(connection_id, worker_id, token, checkpoint_seq)
        return (await self._apply(cmd, now_ms, "end_stream"))[0]

    async def report_upstream_failure(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        checkpoint_seq: int,
        not_before_ms: int,
        reason: str,
        now_ms: int,
    ) -> Connection:
        cmd = ReportUpstreamFailure(
            connection_id, worker_id, token, checkpoint_seq, not_before_ms, reason
        )
        return (await self._apply(cmd, now_ms, "report_upstream_failure"))[0]

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        self._count("iter_orphans")
        orphans = [c for c in self._states.values() if c.is_orphan(now_ms)]
        for i in range(0, len(orphans), page_size):
            yield orphans[i : i + page_size]

    async def next_available_at(self, now_ms: int) -> int | None:
        self._count("next_available_at")
        times = [
            c.available_at_ms
            for c in self._states.values()
            if c.desired_state is DesiredState.STARTED and c.available_at_ms >= now_ms
        ]
        return min(times, default=None)

    async def desired_states(self, connection_ids: Sequence[str]) -> Mapping[str, DesiredState]:
        self._count("desired_states")
        return {
            cid: self._states[cid].desired_state for cid in connection_ids if cid in self._states
        }

    async def history(self, connection_id: str) -> Sequence[Event]:
        self._count("history")
        return list(self._log.get(connection_id, []))

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        return [self._states[k] for k in sorted(self._states)[:limit]]

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1
