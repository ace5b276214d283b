"""FaultInjectingStore: a ConnectionStore decorator that misbehaves on purpose, for tests,
chaos runs and demos: outages, lost responses, added latency and a wall clock that is off.

It wraps only what a store implements — `execute`, `execute_session` and the queries — so the
named operations (`try_acquire`, `renew_session`, `checkpoint`…) come from the port and meet
the faults through the command they send. An operation is named by its command class
(`Acquire`, `RenewSession`, `Checkpoint`…) or by its query method (`get`, `stop_requested`…):
`OPERATIONS`, derived from the domain's command unions and the port's abstract methods.

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
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from application.errors import StoreUnavailable
from application.ports import Clock, ConnectionStore
from application.ports.store import CommandResult, SessionResult
from domain import Command, Connection, Event, SessionCommand, SessionEvent, WorkerSession

# The fault menu, listed once: every command a store executes, by class name, and every query.
COMMANDS = frozenset(
    cls.__name__ for cls in (*typing.get_args(Command), *typing.get_args(SessionCommand))
)
QUERIES = frozenset(ConnectionStore.__abstractmethods__ - {"execute", "execute_session"})
OPERATIONS = COMMANDS | QUERIES

_T = typing.TypeVar("_T")


class UnknownOperation(ValueError):
    pass


def check_operation(op: str) -> str:
    """Raises UnknownOperation unless `op` is on the menu (a misspelt plan must not lie idle)."""
    if op not in OPERATIONS:
        raise UnknownOperation(f"unknown store operation {op!r}; allowed: {sorted(OPERATIONS)}")
    return op


class FaultInjectingStore(ConnectionStore):
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
        self._stalls: dict[str, list[float]] = {}  # op -> queue of extra seconds
        self.injected = 0

    def fail_next(self, op: str, n: int = 1, *, applied: bool = False) -> None:
        """Plan the next `n` calls of `op` (a name in OPERATIONS) to fail."""
        self._planned.setdefault(check_operation(op), []).extend([applied] * n)

    def stall_next(self, op: str, seconds: float, n: int = 1) -> None:
        """Plan the next `n` calls of `op` to be answered `seconds` late (then correctly): one
        slow request among fast ones, as a real store's tail latency is."""
        self._stalls.setdefault(check_operation(op), []).extend([seconds] * n)

    def clear_plans(self) -> None:
        """Forget every planned failure and stall not yet used."""
        self._planned.clear()
        self._stalls.clear()

    async def _call(self, op: str, call: Callable[[], Awaitable[_T]]) -> _T:
        if self.latency_s:
            await self._clock.sleep(self.latency_s)
        stalls = self._stalls.get(op)
        if stalls:
            self.injected += 1
            await self._clock.sleep(stalls.pop(0))
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
                await call()
            await self._clock.sleep(self.timeout_s)
            raise StoreUnavailable(f"injected timeout ({op})")
        planned = self._planned.get(op)
        if planned:
            applied = planned.pop(0)
            self.injected += 1
            if applied:
                await call()
            raise StoreUnavailable(f"injected {'lost response' if applied else 'failure'} ({op})")
        return await call()

    # -- commands ----------------------------------------------------------------------------

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        return await self._call(
            type(command).__name__, lambda: self._inner.execute(command, now_ms)
        )

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        return await self._call(
            type(command).__name__, lambda: self._inner.execute_session(command, now_ms)
        )

    # -- queries -----------------------------------------------------------------------------

    async def get(self, connection_id: str) -> Connection | None:
        return await self._call("get", lambda: self._inner.get(connection_id))

    async def get_session(self, session_id: str) -> WorkerSession | None:
        return await self._call("get_session", lambda: self._inner.get_session(session_id))

    async def list_sessions(self) -> Sequence[WorkerSession]:
        return await self._call("list_sessions", self._inner.list_sessions)

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        # All pages in one call, so that a fault hits the scan as a whole, never half of it.
        pages = await self._call("iter_orphans", lambda: self._orphan_pages(now_ms, page_size))
        for page in pages:
            yield page

    async def _orphan_pages(self, now_ms: int, page_size: int) -> list[Sequence[Connection]]:
        return [page async for page in self._inner.iter_orphans(now_ms, page_size)]

    async def next_available_at(self, now_ms: int) -> int | None:
        return await self._call("next_available_at", lambda: self._inner.next_available_at(now_ms))

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        return await self._call("stop_requested", lambda: self._inner.stop_requested(session_id))

    async def owned_by(self, session_id: str) -> Sequence[str]:
        return await self._call("owned_by", lambda: self._inner.owned_by(session_id))

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        return await self._call(
            "forget_session", lambda: self._inner.forget_session(session_id, now_ms)
        )

    async def history(self, connection_id: str) -> Sequence[Event]:
        return await self._call("history", lambda: self._inner.history(connection_id))

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        return await self._call("session_history", lambda: self._inner.session_history(session_id))

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        return await self._call("list_connections", lambda: self._inner.list_connections(limit))
