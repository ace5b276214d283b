"""The clock port: wall time for leases, monotonic time for self-fencing, and sleeping."""

from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock epoch milliseconds (compared across workers: keep clocks in sync)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; deadlines for self-fencing use this."""
        ...

    async def sleep(self, seconds: float) -> None: ...
