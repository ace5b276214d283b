"""The hint loop's helpers (loops.py `poll_queue`): while the queue has a backlog (the first
receiver found a full batch) and the worker's room would fill their batches, helpers receive
too (without waiting: a helper never holds a long poll open), their batches taken side by
side; at rest, only the first receiver polls. A deploy wave's hints waited for a single
receiver, ten at a time (bench/RESULTS.md section 34)."""

from collections.abc import Sequence

from adapters.memory.clock import FakeClock
from adapters.memory.queue import InMemoryNotificationQueue
from application.ports.queue import Delivery
from tests.support.fleet import Fleet


class WatchedQueue:
    """The fleet's queue, recording each receive as (virtual s, wait asked, hints handed)."""

    def __init__(self, inner: InMemoryNotificationQueue, clock: FakeClock) -> None:
        self._inner = inner
        self._clock = clock
        self.receives: list[tuple[float, float, int]] = []
        self.send = inner.send
        self.release = inner.release
        self.delete = inner.delete

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        got = await self._inner.receive(max_messages, wait_s)
        self.receives.append((self._clock.monotonic(), wait_s, len(got)))
        return got


async def test_helpers_receive_only_through_a_backlog(fleet: Fleet) -> None:
    queue = WatchedQueue(fleet.queue, fleet.clock)
    member = fleet.add_worker("w1", queue=queue)
    await fleet.clock.advance(5)
    assert all(wait > 0 for _, wait, _ in queue.receives), "at rest: the long poll alone"

    # Each acquisition takes 50 ms, as a real store's round trips do: a batch holds its
    # receiver that long.
    member.store.latency_s = 0.05
    began, ids = fleet.clock.monotonic(), [f"c{i:02}" for i in range(60)]
    for cid in ids:
        await fleet.start(cid)
    took = await fleet.clock.run_until(lambda: all(fleet.owner_of(c) == "w1" for c in ids), 10)

    helped = [n for t, wait, n in queue.receives if t >= began and wait == 0]
    assert sum(helped) >= 20, queue.receives
    # Six batches side by side in two rounds, not one after another (about 0.1 s each: the
    # acquisitions, then the deletes).
    assert took < 0.4, took
    await fleet.clock.advance(5)  # the STARTs' delayed copies are a backlog too
    after = len(queue.receives)
    await fleet.clock.advance(5)
    assert all(wait > 0 for _, wait, _ in queue.receives[after:]), "helpers stop with it"
