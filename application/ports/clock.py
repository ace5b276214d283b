"""The clock port: wall time for leases, monotonic time for self-fencing, and sleeping."""

from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock epoch milliseconds (compared across workers: keep clocks in sync)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; deadlines for self-fencing use this."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]:
        """`async with clock.timeout(s):` cancels the block after `s` seconds on this clock
        and raises TimeoutError out of it (asyncio.timeout on this clock's time). Unlike
        racing the block against a sleep, it starts no task: it runs on every heartbeat."""
        ...
