"""FaultInjectingStore: a ConnectionStore decorator that misbehaves on purpose, for tests,
chaos runs and demos: outages, lost responses, added latency and a wall clock that is off.

Modes (combinable, changeable while running):
- `severed`: every call hangs until cancelled (a crashed process, a black-holed network);
- `outage`: every call raises StoreUnavailable (a partition with fast timeouts);
- `fail_next(op, n, applied=False)`: the next n calls of `op` raise StoreUnavailable — after
  really applying the write when `applied` (a response lost on the way back);
- `latency_s`: added before every call;
- `error_rate`: each call raises StoreUnavailable with this probability, unapplied (throttling:
  DynamoDB refuses the request before doing anything);
- `timeout_s`: a call (each with probability `timeout_rate`) waits this long, then raises
  StoreUnavailable; half of them really applied the call first (a read timeout: the caller
  cannot know whether its write landed).
"""

import asyncio
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from application.errors import StoreUnavailable
from application.ports import Clock, ConnectionStore
from application.ports.store import CommandResult, RenewResult
from domain import Connection, DesiredState, Event


class FaultInjectingStore:
    def __init__(
        self, inner: ConnectionStore, clock: Clock, rng: random.Random | None = None
    ) -> None:
        self._inner = inner
        self._clock = clock
        self._rng = rng or random.Random()
        self.severed = False
        self.outage = False
        self.latency_s = 0.0
        self.error_rate = 0.0
        self.timeout_s = 0.0
        self.timeout_rate = 1.0
        self._planned: dict[str, list[bool]] = {}  # op -> queue of "applied?" flags
        self.injected = 0

    def fail_next(self, op: str, n: int = 1, *, applied: bool = False) -> None:
        self._planned.setdefault(op, []).extend([applied] * n)

    def clear_plans(self) -> None:
        """Forget every planned failure not yet used."""
        self._planned.clear()

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if self.latency_s:
            await self._clock.sleep(self.latency_s)
        if self.severed:
            await asyncio.Event().wait()  # never set: hang until cancelled
        if self.outage:
            self.injected += 1
            raise StoreUnavailable(f"injected outage ({op})")
        if self.error_rate and self._rng.random() < self.error_rate:
            self.injected += 1
            raise StoreUnavailable(f"injected throttling ({op})")
        if self.timeout_s and self._rng.random() < self.timeout_rate:
            self.injected += 1
            if self._rng.random() < 0.5:
                await fn(*args)
            await self._clock.sleep(self.timeout_s)
            raise StoreUnavailable(f"injected timeout ({op})")
        planned = self._planned.get(op)
        if planned:
            applied = planned.pop(0)
            self.injected += 1
            if applied:
                await fn(*args)
            raise StoreUnavailable(f"injected {'lost response' if applied else 'failure'} ({op})")
        return await fn(*args)

    async def start(self, connection_id: str, ws_url: str, now_ms: int) -> CommandResult:
        result: CommandResult = await self._call(
            "start", self._inner.start, connection_id, ws_url, now_ms
        )
        return result

    async def stop(self, connection_id: str, now_ms: int) -> CommandResult:
        result: CommandResult = await self._call("stop", self._inner.stop, connection_id, now_ms)
        return result

    async def get(self, connection_id: str) -> Connection | None:
        result: Connection | None = await self._call("get", self._inner.get, connection_id)
        return result

    async def try_acquire(
        self, connection_id: str, worker_id: str, lease_ms: int, now_ms: int
    ) -> Connection | None:
        result: Connection | None = await self._call(
            "try_acquire", self._inner.try_acquire, connection_id, worker_id, lease_ms, now_ms
        )
        return result

    async def renew(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        lease_ms: int,
        checkpoint_seq: int,
        now_ms: int,
    ) -> RenewResult:
        result: RenewResult = await self._call(
            "renew",
            self._inner.renew,
            connection_id,
            worker_id,
            token,
            lease_ms,
            checkpoint_seq,
            now_ms,
        )
        return result

    async def release(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        result: Connection = await self._call(
            "release", self._inner.release, connection_id, worker_id, token, checkpoint_seq, now_ms
        )
        return result

    async def end_stream(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        result: Connection = await self._call(
            "end_stream",
            self._inner.end_stream,
            connection_id,
            worker_id,
            token,
            checkpoint_seq,
            now_ms,
        )
        return result

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
        result: Connection = await self._call(
            "report_upstream_failure",
            self._inner.report_upstream_failure,
            connection_id,
            worker_id,
            token,
            checkpoint_seq,
            not_before_ms,
            reason,
            now_ms,
        )
        return result

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        pages: list[Sequence[Connection]] = await self._call(
            "iter_orphans", self._collect_orphans, now_ms, page_size
        )
        for page in pages:
            yield page

    async def _collect_orphans(self, now_ms: int, page_size: int) -> list[Sequence[Connection]]:
        return [page async for page in self._inner.iter_orphans(now_ms, page_size)]

    async def next_available_at(self, now_ms: int) -> int | None:
        result: int | None = await self._call(
            "next_available_at", self._inner.next_available_at, now_ms
        )
        return result

    async def desired_states(self, connection_ids: Sequence[str]) -> Mapping[str, DesiredState]:
        result: Mapping[str, DesiredState] = await self._call(
            "desired_states", self._inner.desired_states, connection_ids
        )
        return result

    async def history(self, connection_id: str) -> Sequence[Event]:
        result: Sequence[Event] = await self._call("history", self._inner.history, connection_id)
        return result

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        result: Sequence[Connection] = await self._call(
            "list_connections", self._inner.list_connections, limit
        )
        return result
