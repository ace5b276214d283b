"""A queue view for the worker tests on the in-memory fleet: which rounds of a hint
(application/hints.py: the first, and the copy delayed a second) get through."""

from collections.abc import Sequence

from adapters.memory.clock import FakeClock
from application.ports import HintOrigin, NotificationQueue


class HintRounds:
    """The queue, with the first rounds (`first=False`: lost, as to a dead worker's open long
    poll) or the delayed copies (`copies=False`) of this worker's hints dropped; `first_lost`:
    only its first that many undelayed sends are lost (the open poll returns with the first
    batch it catches). `answer_s`:
    each send's answer comes this long after its hint has landed (needs `clock`), as on SQS,
    where a waiting long poll is answered as the hint lands. `sent`: each hint that got
    through, (connection id, origin), as a taker receives it."""

    def __init__(
        self,
        inner: NotificationQueue,
        *,
        first: bool = True,
        copies: bool = True,
        first_lost: int = 0,
        clock: FakeClock | None = None,
        answer_s: float = 0.0,
    ) -> None:
        self._inner = inner
        self._first, self._copies = first, copies
        self._first_lost = first_lost
        self._clock, self._answer_s = clock, answer_s
        self.receive = inner.receive
        self.release = inner.release
        self.delete = inner.delete
        self.sent: list[tuple[str, HintOrigin | None]] = []

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        if not (self._copies if delay_s else self._first):
            return
        if not delay_s and self._first_lost > 0:
            self._first_lost -= 1
            return
        await self._inner.send(connection_ids, delay_s=delay_s, copy=copy, origin=origin)
        self.sent += [(cid, origin) for cid in connection_ids]
        if self._clock is not None and self._answer_s:
            await self._clock.sleep(self._answer_s)
