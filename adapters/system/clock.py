"""SystemClock: the real wall and monotonic clocks."""

import asyncio
import time
from contextlib import AbstractAsyncContextManager


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]:
        return asyncio.timeout(max(0.0, seconds))
