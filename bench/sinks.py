"""Sink decorators for capacity runs: `TimingSink` measures each message's store latency
(`received_at_ms`, set by the worker when the message came off the socket, to the moment the
inner sink's write returned) into a fixed-size histogram; `DiscardSink` stores nothing, so a
capacity run measures the worker's own cost and not an in-memory pile of messages."""

import bisect
import time
from collections.abc import Sequence

from application.ports import MessageSink
from application.ports.sink import StoredMessage

# Histogram bucket upper bounds in ms: fine below a second, coarse above; last is overflow.
BOUNDS_MS = [*range(0, 100, 5), *range(100, 1000, 25), *range(1000, 10_000, 250), 10**9]
TARGET_MS = 2000


class DiscardSink:
    max_batch = 500
    max_message_bytes = 16 * 2**20

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        return None

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int | None:
        return None  # keeps nothing, so cannot say


class TimingSink:
    def __init__(self, inner: MessageSink) -> None:
        self._inner = inner
        self.max_batch = inner.max_batch
        self.max_message_bytes = inner.max_message_bytes
        self.reset()

    def reset(self) -> None:
        self.counts: list[int] = [0] * len(BOUNDS_MS)
        self.stored = 0
        self.writes = 0
        self.within_target = 0
        self.max_ms: int = 0

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int | None:
        return await self._inner.resume_point(connection_id, checkpoint_seq)

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        await self._inner.write(messages)
        now = time.time_ns() // 1_000_000
        self.writes += 1
        for message in messages:
            latency = max(0, now - message.received_at_ms)
            self.counts[bisect.bisect_left(BOUNDS_MS, latency)] += 1
            self.within_target += latency <= TARGET_MS
            self.max_ms = max(self.max_ms, latency)
        self.stored += len(messages)

    def quantile_ms(self, q: float) -> int | None:
        """Upper bound of the bucket holding the q-quantile (conservative)."""
        if not self.stored:
            return None
        rank = q * self.stored
        seen = 0
        for bound, count in zip(BOUNDS_MS, self.counts, strict=True):
            seen += count
            if seen >= rank:
                return int(min(bound, self.max_ms))
        return self.max_ms
