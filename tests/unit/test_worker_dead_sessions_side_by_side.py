"""After a scan that found several dead sessions, each is asked for its STOPPED connections by
the one survivor that tends it (domain/balance.py `tended_by`), and a survivor asks those it
tends side by side, not one after another (6280185): one round trip per death held up the
survivor's next scan at 100 workers by 33 of them. Counted without timing: a fake store holds
each of those reads open a while and counts how many are open at once."""

from collections.abc import Sequence

from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from application.ports import ConnectionStore
from application.worker.loops import _tended
from application.worker.session_keeper import worker_of
from domain import WorkerSession
from domain.balance import tended_by
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


async def test_each_dead_session_is_asked_for_its_stops_by_the_survivor_that_tends_it() -> None:
    """GIVEN seven workers WHEN five of them crash at one instant THEN each dead session's STOPs
    are read by the survivor that tends it and by no other, and each survivor reads those it
    tends with all of those reads open together."""
    clock = FakeClock()
    layers: dict[str, CountingStore] = {}

    def counting(caller: str, inner: ConnectionStore) -> ConnectionStore:
        layers[caller] = CountingStore(caller, inner, clock)
        return layers[caller]

    fleet = Fleet(clock=clock, store_layer=counting)
    try:
        names = ("a", "b", "c", "d", "e", "f", "g")
        members = {name: fleet.add_worker(name) for name in names}
        await clock.advance(1)
        doomed, survivors = names[:5], names[5:]
        session_of = {name: members[name].worker.keeper.session_id for name in names}
        live = [session_of[name] for name in survivors]
        tenders = tended_by((session_of[d] for d in doomed), live)
        tends = {
            name: {session_of[d] for d in doomed if tenders[session_of[d]] == session_of[name]}
            for name in survivors
        }
        assert all(tends.values()), "each survivor tends some (else pick other names)"
        for name in doomed:
            await fleet.crash(name)

        def all_asked() -> bool:
            return all(tends[name] <= set(layers[name].asked) for name in survivors)

        await clock.run_until(all_asked, 30)
        await clock.advance(1)

        for name in survivors:
            assert set(layers[name].asked) == tends[name], name
            assert layers[name].most_open == len(tends[name]), (name, layers[name].most_open)
    finally:
        await fleet.close()


def test_a_leaving_worker_tends_no_dead_session() -> None:
    """A shutting-down worker (its session reporting a capacity of 0) takes nothing more: the
    dead sessions it would have tended are the live others'."""
    now = 10_000
    leaver = WorkerSession("leaver#1", 1, expires_at_ms=now + 4_000, held=5, capacity=0)
    staying = WorkerSession("staying#1", 1, expires_at_ms=now + 4_000, held=5, capacity=100)
    dead = [WorkerSession(f"d{i:02}#1", 1, expires_at_ms=now - 1) for i in range(20)]
    listed = [leaver, staying, *dead]

    assert _tended(listed, now, leaver.session_id) == []
    assert _tended(listed, now, staying.session_id) == dead
