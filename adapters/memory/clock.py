"""FakeClock: virtual time for tests. Sleepers wake only when the test advances time, so a
fleet of workers can live through minutes of leases in milliseconds, deterministically."""

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable


class FakeClock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = float(start_ms)
        self._start_ms = float(start_ms)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._ids = itertools.count()
        self.skew_ms = 0  # added to now_ms() only: a worker whose wall clock is off

    def now_ms(self) -> int:
        return int(self._now_ms) + self.skew_ms

    def monotonic(self) -> float:
        return (self._now_ms - self._start_ms) / 1000

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now_ms + seconds * 1000, next(self._ids), future))
        await future

    @contextlib.asynccontextmanager
    async def timeout(self, seconds: float) -> AsyncIterator[None]:
        """asyncio.timeout, expired by virtual time: when the test advances past the
        deadline, the scope is rescheduled to "now" on the real loop and fires at once."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(None) as scope:
            armed = True

            def expire(future: asyncio.Future[None]) -> None:
                if armed and not future.cancelled():
                    scope.reschedule(loop.time())

            deadline: asyncio.Future[None] = loop.create_future()
            deadline.add_done_callback(expire)
            if seconds <= 0:
                deadline.set_result(None)
            else:
                entry = (self._now_ms + seconds * 1000, next(self._ids), deadline)
                heapq.heappush(self._sleepers, entry)
            try:
                yield
            finally:
                armed = False
                deadline.cancel()

    async def advance(self, seconds: float, step_s: float = 0.01) -> None:
        """Move time forward in steps, letting every woken task run between steps."""
        end = self._now_ms + seconds * 1000
        while True:
            await self._settle()
            # A step nobody sleeps through is skipped: time jumps to the next wake-up (or the
            # end). Nothing else moves virtual time, so no task can tell the difference.
            step_to = self._now_ms + step_s * 1000
            if self._sleepers:
                step_to = max(step_to, self._sleepers[0][0])
            self._now_ms = min(end, step_to)
            while self._sleepers and self._sleepers[0][0] <= self._now_ms:
                _, _, future = heapq.heappop(self._sleepers)
                if not future.done():
                    future.set_result(None)
            await self._settle()
            if self._now_ms >= end:
                return

    async def _settle(self) -> None:
        """Let the woken tasks run (a few rounds of the event loop; a subclass may run more)."""
        await _settle()

    async def run_until(
        self, predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.01
    ) -> float:
        """Advance until `predicate()` holds; return the virtual seconds it took.
        Raises TimeoutError after `timeout_s` of virtual time."""
        began = self._now_ms
        while not predicate():
            if self._now_ms - began >= timeout_s * 1000:
                raise TimeoutError(f"condition not met within {timeout_s}s of virtual time")
            await self.advance(step_s, step_s)
        return (self._now_ms - began) / 1000


async def _settle(rounds: int = 30) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)
