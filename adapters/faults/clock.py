"""SkewedClock: a wall clock that is off by `skew_ms` (NTP gone wrong); monotonic time and
sleeping are untouched, as they are on a real machine whose wall clock drifts."""

from contextlib import AbstractAsyncContextManager

from application.ports import Clock


class SkewedClock:
    def __init__(self, inner: Clock, skew_ms: int) -> None:
        self._inner = inner
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return self._inner.now_ms() + self.skew_ms

    def monotonic(self) -> float:
        return self._inner.monotonic()

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]:
        return self._inner.timeout(seconds)
