"""SimClock: the project's virtual clock (adapters/memory/clock.py), whose steps let every task
that can run, run, before time moves on: the simulated workers' CPU is free.

FakeClock runs 30 rounds of the event loop before and after each step, enough for a test's few
workers. A thousand workers sharing one loop need more: a survivor of an AZ loss walks the
whole scan's orphans, declining most in waves of takes, three rounds of the loop a wave; at 30
rounds a step, that walk (a few hundred milliseconds of a real worker's CPU, at most) took
whole virtual seconds, during which its next scan, its renewals' answers and the others'
takes waited: a delay that grew with the fleet, made by the simulation (docs/decisions.md,
"The simulation's steps run every task that can run"). Here a step runs rounds until the loop
has nothing ready, up to `MAX_ROUNDS` (a task that only ever yields would otherwise hold
virtual time still)."""

import asyncio

from adapters.memory.clock import FakeClock

MAX_ROUNDS = 100_000


class SimClock(FakeClock):
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        super().__init__(start_ms)
        self.rounds = 0  # rounds of the loop run by the steps (a measure of the work)
        self.capped = 0  # steps that hit MAX_ROUNDS with work still ready

    async def _settle(self) -> None:
        """Rounds of the loop until nothing is ready (see the module docstring)."""
        loop = asyncio.get_running_loop()
        for _ in range(MAX_ROUNDS):
            await asyncio.sleep(0)
            self.rounds += 1
            if not _ready(loop):
                return
        self.capped += 1


def _ready(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop has a callback to run now: one ready, or a timer due (a virtual
    timeout that expired is rescheduled to the loop's now). Reads the loop's own queues
    (CPython's BaseEventLoop); the simulation runs on that loop only."""
    ready = getattr(loop, "_ready", ())
    scheduled = getattr(loop, "_scheduled", ())
    return bool(ready) or bool(scheduled and scheduled[0].when() <= loop.time())
