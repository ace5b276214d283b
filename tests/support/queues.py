"""Queue views for the worker tests on the in-memory fleet."""

from collections.abc import Sequence

from adapters.memory.clock import FakeClock
from application.ports import NotificationQueue


class FirstRoundOnly:
    """The queue, with every delayed copy of a hint dropped (application/hints.py): for tests
    of what the first round does alone. `answer_s`: each send's answer comes this long after
    its hint has landed, as on SQS, where a waiting long poll is answered as the hint lands."""

    def __init__(self, inner: NotificationQueue, clock: FakeClock, answer_s: float = 0.0) -> None:
        self._inner = inner
        self._clock = clock
        self._answer_s = answer_s
        self.receive = inner.receive
        self.release = inner.release
        self.delete = inner.delete

    async def send(self, connection_ids: Sequence[str], *, delay_s: int = 0) -> None:
        if delay_s:
            return
        await self._inner.send(connection_ids)
        if self._answer_s:
            await self._clock.sleep(self._answer_s)


class CopiesOnly:
    """The queue, with every first-round hint lost (as to a dead worker's open long poll) and
    only the delayed copies arriving. `copies=False` loses those too."""

    def __init__(self, inner: NotificationQueue, *, copies: bool = True) -> None:
        self._inner = inner
        self._copies = copies
        self.receive = inner.receive
        self.release = inner.release
        self.delete = inner.delete

    async def send(self, connection_ids: Sequence[str], *, delay_s: int = 0) -> None:
        if delay_s and self._copies:
            await self._inner.send(connection_ids, delay_s=delay_s)
