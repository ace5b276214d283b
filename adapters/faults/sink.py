"""FaultInjectingSink: a MessageSink decorator that misbehaves on purpose, for tests, chaos runs
and demos, as the sink's own storage can: down, slow, half-done, or done without saying so.

Modes (combinable, changeable while running):
- `outage`: every write raises SinkUnavailable, storing nothing, and so does every
  `resume_point` (a new owner cannot learn where to resume while the sink is down);
- `unnamed_outage`: the same, raising a plain OSError (ECONNRESET), as a user's sink that
  names no error does (its client library's own);
- `latency_s`: added before every write and every `resume_point` (a slow or throttled sink);
- `fail_next(n, mode)`: the next n writes raise SinkUnavailable after storing
  - `UNAPPLIED`: nothing (refused before anything was done),
  - `PARTIAL`: every other message of the batch (a BatchWriteItem that left some items
    unprocessed: which ones is the sink's choice, so not a prefix),
  - `APPLIED`: the whole batch (a timeout after the write landed: the outcome is unknown to
    the caller, which must retry, and idempotence keeps one copy).

`injected` counts the writes that failed on purpose, so a test can show its fault happened.
"""

import enum
import errno
from collections.abc import Sequence

from application.errors import SinkUnavailable
from application.ports import Clock, MessageSink
from application.ports.sink import StoredMessage


class SinkFault(enum.Enum):
    UNAPPLIED = "unapplied"
    PARTIAL = "partial"
    APPLIED = "applied"


class FaultInjectingSink:
    def __init__(self, inner: MessageSink, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.max_batch = inner.max_batch
        self.max_message_bytes = inner.max_message_bytes
        self.outage = False
        self.unnamed_outage = False
        self.latency_s = 0.0
        self._planned: list[SinkFault] = []
        self.injected = 0

    def fail_next(self, n: int = 1, mode: SinkFault = SinkFault.UNAPPLIED) -> None:
        self._planned.extend([mode] * n)

    def clear_plans(self) -> None:
        """Forget every planned failure not yet used."""
        self._planned.clear()

    @property
    def planned(self) -> int:
        return len(self._planned)

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int | None:
        if self.latency_s:
            await self._clock.sleep(self.latency_s)
        self._down()
        return await self._inner.resume_point(connection_id, checkpoint_seq)

    def _down(self) -> None:
        if self.outage:
            self.injected += 1
            raise SinkUnavailable("injected sink outage")
        if self.unnamed_outage:
            self.injected += 1
            raise OSError(errno.ECONNRESET, "injected outage of a sink that names no error")

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:  # the contract's refusal, before any fault
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        if self.latency_s:
            await self._clock.sleep(self.latency_s)
        self._down()
        if not self._planned:
            await self._inner.write(messages)
            return
        mode = self._planned.pop(0)
        self.injected += 1
        if mode is SinkFault.PARTIAL:
            await self._inner.write(messages[::2])
        elif mode is SinkFault.APPLIED:
            await self._inner.write(messages)
        raise SinkUnavailable(f"injected sink failure ({mode.value})")
