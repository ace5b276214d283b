"""Sessions: the connections this worker owns, the tasks that run them, and lease-before-connect."""

import asyncio
import logging
from collections.abc import Iterator, Sequence

from application.aio import first_completed
from application.errors import StoreUnavailable
from application.ports.metrics import ACQUISITION_CONFLICTS, LEASE_ACQUISITIONS, TAKEOVERS
from application.worker.context import WorkerContext
from application.worker.ingest import IngestWriter
from application.worker.session import ConnectionSession, SessionEnd
from domain import Connection, DesiredState

log = logging.getLogger(__name__)


class Sessions:
    def __init__(self, ctx: WorkerContext, writer: IngestWriter) -> None:
        self._ctx = ctx
        self._writer = writer
        self._running: dict[str, tuple[ConnectionSession, asyncio.Task[SessionEnd]]] = {}
        self._acquiring: set[str] = set()
        self.handed_over: list[str] = []  # released during shutdown: hint the fleet

    def __len__(self) -> int:
        return len(self._running)

    def __contains__(self, connection_id: object) -> bool:
        return connection_id in self._running or connection_id in self._acquiring

    def __iter__(self) -> Iterator[ConnectionSession]:
        return iter([session for session, _ in self._running.values()])

    @property
    def free(self) -> int:
        return self._ctx.config.max_connections - len(self._running) - len(self._acquiring)

    async def take_each(self, candidates: Sequence[tuple[str, bool]]) -> list[str]:
        """Take each (connection_id, expired_owner) while there is room, in order, with up
        to `take_concurrency` acquisitions in flight: one at a time, a dead worker's share of
        thousands would move at one store round trip per connection. Returns the ids not
        tried for want of room. Once every take has ended, raises the first error met (a
        StoreUnavailable: the loop logs it and tries again later)."""
        room = asyncio.Semaphore(self._ctx.config.take_concurrency)
        no_room: list[str] = []

        async def one(connection_id: str, expired_owner: bool) -> None:
            async with room:
                if self.free <= 0 and connection_id not in self:
                    no_room.append(connection_id)
                    return
                await self.take(connection_id, expired_owner=expired_owner)

        # return_exceptions: one failed take must not leave the others running unowned;
        # and cancelling this call cancels and awaits every one of them.
        outcomes = await asyncio.gather(
            *(one(cid, expired) for cid, expired in candidates), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return no_room

    async def take(self, connection_id: str, *, expired_owner: bool = False) -> bool:
        """Acquire the lease, and only then start streaming. False if not ours to take."""
        ctx = self._ctx
        if connection_id in self or self.free <= 0:
            return False
        self._acquiring.add(connection_id)
        try:
            started = ctx.clock.monotonic()
            now_ms = ctx.clock.now_ms()
            try:
                acquired = await ctx.store.try_acquire(
                    connection_id, ctx.worker_id, ctx.config.lease_ms, now_ms
                )
            except StoreUnavailable:
                acquired = await self._granted_after_all(connection_id, now_ms)
                if acquired is None:
                    raise
        finally:
            self._acquiring.discard(connection_id)
        if acquired is None:
            ctx.metrics.count(ACQUISITION_CONFLICTS)
            return False
        ctx.metrics.count(LEASE_ACQUISITIONS)
        if expired_owner:
            ctx.metrics.count(TAKEOVERS)
        log.info(
            "lease acquired, resuming from seq %d",
            acquired.resume_from_seq,
            extra=ctx.log_extra(connection_id, acquired.token),
        )
        session = ConnectionSession(ctx, acquired, started, self._writer)
        task = asyncio.create_task(session.run(), name=f"session:{connection_id}")
        self._running[connection_id] = (session, task)
        task.add_done_callback(lambda _: self._done(connection_id, session))
        return True

    async def _granted_after_all(self, connection_id: str, now_ms: int) -> Connection | None:
        """After a try_acquire whose outcome is unknown (found by tests/chaos): the grant may
        have landed with its answer lost, which would leave the connection leased to nobody
        until the lease ran out. The stored item proves it is this call's grant when it names
        us with exactly the expiry this call asked for (`now_ms + lease_ms`; an older lease of
        ours would expire sooner, and we renew nothing we hold no session for). Raises
        StoreUnavailable if the store cannot be read either."""
        ctx = self._ctx
        current = await ctx.store.get(connection_id)
        granted = (
            current is not None
            and current.owner == ctx.worker_id
            and current.expires_at_ms == now_ms + ctx.config.lease_ms
            and current.desired_state is DesiredState.STARTED
        )
        if not granted:
            return None
        log.info(
            "lease acquired (its answer was lost, the stored item shows it)",
            extra=ctx.log_extra(connection_id),
        )
        return current

    def _done(self, connection_id: str, session: ConnectionSession) -> None:
        entry = self._running.get(connection_id)
        if entry is not None and entry[0] is session:
            del self._running[connection_id]
        if session.end is SessionEnd.SHUTDOWN:
            self.handed_over.append(connection_id)

    def stop(self, connection_id: str, reason: SessionEnd) -> None:
        entry = self._running.get(connection_id)
        if entry is not None:
            entry[0].request_stop(reason)

    async def stop_all(self, reason: SessionEnd, budget_s: float) -> None:
        """Ask every session to end, concurrently; cancel whatever outlives the budget."""
        tasks = [task for _, task in self._running.values()]
        for session, _ in self._running.values():
            session.request_stop(reason)
        if not tasks:
            return

        async def all_done() -> None:
            await asyncio.wait(tasks)

        await first_completed(all_done(), self._ctx.clock.sleep(budget_s))
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def cancel_all(self) -> None:
        tasks = [task for _, task in self._running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
