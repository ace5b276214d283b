"""After a scan that found several dead sessions, a survivor asks each of them for its STOPPED
connections side by side, not one after another (6280185): one round trip per death held up
the survivor's next scan at 100 workers by 33 of them. Counted without timing: a fake store
holds each of those reads open a while and counts how many are open at once."""

from collections.abc import Sequence

from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from application.ports import ConnectionStore
from application.worker.session_keeper import worker_of
from tests.support.fleet import Fleet

HELD_S = 0.2  # how long each read of a dead session's STOPs stays open


class CountingStore(FaultInjectingStore):
    """Passes everything through; a worker's STOP read of another worker's session is held
    open HELD_S virtual seconds and counted while it is."""

    def __init__(self, caller: str, inner: ConnectionStore, clock: FakeClock) -> None:
        super().__init__(inner, clock)
        self._caller = caller
        self._clock = clock
        self.open = 0
        self.most_open = 0
        self.asked: list[str] = []

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        if worker_of(session_id) == self._caller:  # its own STOP check
            return await super().stop_requested(session_id)
        self.asked.append(session_id)
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            await self._clock.sleep(HELD_S)
            return await super().stop_requested(session_id)
        finally:
            self.open -= 1


async def test_a_survivor_asks_every_dead_session_for_its_stops_at_once() -> None:
    """GIVEN five workers WHEN three of them crash at one instant THEN the survivor that
    scans next reads the three dead sessions' STOPs with all three reads open together."""
    clock = FakeClock()
    layers: dict[str, CountingStore] = {}

    def counting(caller: str, inner: ConnectionStore) -> ConnectionStore:
        layers[caller] = CountingStore(caller, inner, clock)
        return layers[caller]

    fleet = Fleet(clock=clock, store_layer=counting)
    try:
        members = {name: fleet.add_worker(name) for name in ("a", "b", "c", "d", "e")}
        await clock.advance(1)
        dead = {members[name].worker.keeper.session_id for name in ("a", "b", "c")}
        for name in ("a", "b", "c"):
            await fleet.crash(name)

        def both_asked() -> bool:
            return all(dead <= set(layers[name].asked) for name in ("d", "e"))

        await clock.run_until(both_asked, 30)

        for name in ("d", "e"):
            assert layers[name].most_open == len(dead), (name, layers[name].most_open)
    finally:
        await fleet.close()
