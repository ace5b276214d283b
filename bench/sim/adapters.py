"""The in-memory queue, sink and upstream, at the cost of a fleet: same behaviour as
adapters/memory's (which the tests judge exactly), bookkeeping that does not grow with what the
whole fleet holds.

- `SimQueue`: the in-memory queue's at-least-once delivery with a visibility timeout, from a
  FIFO of visible hints and a heap of hidden ones (the reference scans every message on each
  receive and wakes every long poll on each send: 1,000 pollers times 100,000 STARTs);
- `LeanSink`: the in-memory sink's fencing and resume point, keeping per stored message only
  its token and prev link, not its data (millions of messages over a run);
- `SimUpstream`: the fake upstream with a connect latency, watched (see the class).
"""

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import AsyncIterator, Sequence

import attrs

from adapters.memory.queue import InMemoryNotificationQueue, _delivery
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.upstream import FakeUpstream, _Subscription
from application.aio import first_completed
from application.errors import SinkRefused
from application.ports import Clock
from application.ports.queue import Delivery, HintOrigin, check_delay
from application.ports.sink import StoredMessage, follow_links, storable


@attrs.define(eq=False)
class _Hint:
    body: str
    delayed: bool
    origin: HintOrigin | None = None
    receipt: str | None = None
    hidden_until: float = 0.0  # monotonic; meaningful while hidden
    generation: int = 0  # bumped on every move, so stale heap entries are skipped
    deleted: bool = False


class SimQueue(InMemoryNotificationQueue):
    def __init__(self, clock: Clock, visibility_timeout_s: float = 30.0) -> None:
        super().__init__(clock, visibility_timeout_s)
        self._visibility_s = visibility_timeout_s
        self._visible: deque[_Hint] = deque()
        self._hidden: list[tuple[float, int, int, _Hint]] = []
        self._by_receipt: dict[str, _Hint] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._ids = itertools.count()
        self.received = 0

    def _hide(self, hint: _Hint, until: float) -> None:
        hint.generation += 1
        hint.hidden_until = until
        heapq.heappush(self._hidden, (until, next(self._ids), hint.generation, hint))

    def _surface(self, now: float) -> None:
        while self._hidden and self._hidden[0][0] <= now:
            _, _, generation, hint = heapq.heappop(self._hidden)
            if hint.generation == generation and not hint.deleted:
                if hint.receipt is not None:
                    del self._by_receipt[hint.receipt]
                    hint.receipt = None
                self._visible.append(hint)

    def _wake(self, n: int) -> None:
        while n > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        check_delay(delay_s)
        now = self._clock.monotonic()
        for cid in connection_ids:
            hint = _Hint(cid, delayed=copy, origin=origin)
            if delay_s:
                self._hide(hint, now + delay_s)
            else:
                self._visible.append(hint)
            self.sent += 1
        self._wake(len(connection_ids) if not delay_s else 0)

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        deadline = self._clock.monotonic() + wait_s
        while True:
            now = self._clock.monotonic()
            taken = self._take_visible(max_messages, now)
            if taken or now >= deadline:
                return taken
            wake_at = min(deadline, self._hidden[0][0]) if self._hidden else deadline
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await first_completed(waiter, self._clock.sleep(max(0.0, wake_at - now)))
            finally:
                waiter.cancel()

    def _take_visible(self, max_messages: int, now: float) -> list[Delivery]:
        self._surface(now)
        out: list[Delivery] = []
        while self._visible and len(out) < max_messages:
            hint = self._visible.popleft()
            if hint.deleted:
                continue
            hint.receipt = f"r{next(self._receipts)}"
            self._by_receipt[hint.receipt] = hint
            self._hide(hint, now + self._visibility_s)
            out.append(_delivery(hint.body, hint.receipt, hint.delayed, hint.origin))
        self.received += len(out)
        return out

    async def release(self, receipts: Sequence[str]) -> None:
        back = 0
        for receipt in receipts:
            hint = self._by_receipt.pop(receipt, None)
            if hint is not None:
                hint.receipt = None
                hint.generation += 1  # its heap entry is stale now
                self._visible.appendleft(hint)
                back += 1
        self._wake(back)

    async def delete(self, receipts: Sequence[str]) -> None:
        for receipt in receipts:
            hint = self._by_receipt.pop(receipt, None)
            if hint is not None:
                hint.deleted = True

    def inject_raw(self, body: str) -> None:
        self._visible.append(_Hint(body, delayed=False))
        self._wake(1)

    def __len__(self) -> int:
        return len(self._by_receipt) + sum(1 for h in self._visible if not h.deleted)


class LeanSink(InMemoryMessageSink):
    """Per connection, seq -> (token, prev_seq) of what is stored; `messages` stays empty."""

    def __init__(self) -> None:
        super().__init__(max_batch=25)
        self.stored: dict[str, dict[int, tuple[int, int]]] = {}

    def _store(self, messages: Sequence[StoredMessage]) -> None:
        stale: set[tuple[str, int]] = set()
        invalid: set[tuple[str, int]] = set()
        for message in messages:
            key = (message.connection_id, message.seq)
            seqs = self.stored.setdefault(message.connection_id, {})
            stored = seqs.get(message.seq)
            if not storable(message, self.max_message_bytes):
                invalid.add(key)
            elif stored is not None and stored[0] > message.token:
                stale.add(key)
            else:
                if stored is not None:
                    self.rewrites += 1
                seqs[message.seq] = (message.token, message.prev_seq)
                self.written += 1
        if stale or invalid:
            raise SinkRefused(
                stale=frozenset(stale), conflicts=frozenset(), invalid=frozenset(invalid)
            )

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int:
        seqs = self.stored.get(connection_id, {})
        links = ((seq, seqs[seq][1]) for seq in sorted(seqs) if seq > checkpoint_seq)
        return follow_links(checkpoint_seq, links)[0]

    def seqs(self, connection_id: str) -> list[int]:
        return sorted(self.stored.get(connection_id, {}))


class SimUpstream(FakeUpstream):
    """The fake upstream, opening a subscription in `connect_s` of virtual time (DNS, TCP, TLS,
    the upgrade), and watched: how many streams have a subscriber, every instant a second one
    joined (two owners at once), and each connection's gaps (closed at, opened again at) in
    monotonic seconds."""

    def __init__(self, clock: Clock, rate_per_s: float, connect_s: float) -> None:
        super().__init__(clock, rate_per_s)
        self._sim_clock = clock
        self.connect_s = connect_s
        self.streaming = 0
        self.overlaps: list[tuple[str, float]] = []
        self.down_since: dict[str, float] = {}
        self.gaps: list[tuple[str, float, float]] = []
        self.first_open: dict[str, float] = {}

    @contextlib.asynccontextmanager
    async def open(
        self, url: str, from_seq: int, addresses: Sequence[str] = ()
    ) -> AsyncIterator[_Subscription]:
        await self._sim_clock.sleep(self.connect_s)
        async with super().open(url, from_seq, addresses) as subscription:
            self._joined(url)
            try:
                yield subscription
            finally:
                self._left(url)

    def _joined(self, url: str) -> None:
        subscribers = self.streams[url].subscribers
        now = self._sim_clock.monotonic()
        if subscribers > 1:
            self.overlaps.append((url, now))
        elif subscribers == 1:
            self.streaming += 1
            down = self.down_since.pop(url, None)
            if down is None:
                self.first_open.setdefault(url, now)
            else:
                self.gaps.append((url, down, now))

    def _left(self, url: str) -> None:
        # Called before the subscription's own exit counts it out.
        if self.streams[url].subscribers == 1:
            self.streaming -= 1
            self.down_since[url] = self._sim_clock.monotonic()
