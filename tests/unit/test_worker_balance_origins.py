"""A take through a hint that names its releaser (application/ports/queue.py `HintOrigin`),
on the worker's view of the fleet (application/worker/balance.py), on virtual time and without
a fleet. The balance bench's join (2 workers holding 40, 2 joining) moved 4-6 connections
twice on every backend: the first newcomer to poll took 9 of one releaser's hints, its view was
then "not caught up" with its own takes, so it took by capacity and got 14, and balancing moved
4 of them on. A view that sees the fleet balanced while a releaser hands off to balance is
older than the releaser's (a join it missed): it is read again first."""

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from application.config import WorkerConfig
from application.ports import HintOrigin
from application.worker.balance import (
    ADDRESSED_GRACE_BEATS,
    BEHIND_RECHECK_BEATS,
    LEAVING_GRACE_BEATS,
    Balance,
)
from domain import WorkerSession
from tests.support.leases import worker_context

CAPACITY = 100
CONFIG = WorkerConfig(max_connections=CAPACITY)
ME = "w3#1"


class Rig:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.held = 0
        ctx = worker_context(self.clock, InMemoryMetrics(), config=CONFIG)
        self.balance = Balance(ctx, lambda: ME, lambda: self.held)

    def view(self, others: dict[str, tuple[int, int]]) -> None:
        """The sessions as read now: this worker, and each other as (held, reported at ms)."""
        now, lease = self.clock.now_ms(), CONFIG.lease_ms
        sessions = [WorkerSession(ME, 1, now + lease, self.held, CAPACITY, updated_at_ms=now)]
        sessions += [
            WorkerSession(sid, 1, now + lease, held, CAPACITY, updated_at_ms=at)
            for sid, (held, at) in others.items()
        ]
        self.balance.observe(sessions, now)

    def take(self, count: int, origin: HintOrigin | None, released_at_ms: int) -> None:
        for _ in range(count):
            self.held += 1
            self.balance.took(self.clock.now_ms(), origin, released_at_ms)


async def test_a_take_from_a_releaser_is_counted_once_and_the_share_still_holds() -> None:
    """GIVEN two workers reported at 20 each and two newcomers at 0 (target 10 each) WHEN this
    newcomer takes 9 that w2 released after its last report THEN it may take 1 more, not 91;
    and once w2 reports the release, the same."""
    r = Rig()
    reported = r.clock.now_ms() - 100
    r.view({"w1#1": (20, reported), "w2#1": (20, reported), "w4#1": (0, reported)})
    assert r.balance.room() == 10

    await r.clock.advance(0.2)
    released = r.clock.now_ms() - 50
    r.take(9, HintOrigin("w2#1"), released)
    assert r.balance.room() == 1, "w2's stale report counted the 9 again, or the view let go"

    await r.clock.advance(0.5)
    now = r.clock.now_ms()
    r.view({"w1#1": (20, reported), "w2#1": (11, now), "w4#1": (0, reported)})
    assert r.balance.room() == 1


async def test_a_take_without_a_known_releaser_still_lets_a_stale_view_go() -> None:
    """A START or a releaser the view does not know: nobody's report counts it, so until the
    others report after it the view cannot hold taking back (a burst of STARTs is taken at
    once, tests/unit/test_worker_balance.py)."""
    r = Rig()
    reported = r.clock.now_ms() - 100
    r.view({"w1#1": (20, reported), "w2#1": (20, reported), "w4#1": (0, reported)})
    await r.clock.advance(0.2)
    r.take(9, HintOrigin("w9#1"), r.clock.now_ms() - 50)
    assert r.balance.room() == CAPACITY - 9
    r.take(1, None, r.clock.now_ms())
    assert r.balance.room() == CAPACITY - 10


async def test_a_balancing_hint_on_a_view_in_balance_asks_for_a_fresh_view() -> None:
    r = Rig()
    r.held = 20
    now = r.clock.now_ms()
    r.view({"w1#1": (20, now)})
    w1 = HintOrigin("w1#1")
    assert not r.balance.behind([w1]), "read just now: not read again"

    await r.clock.advance(BEHIND_RECHECK_BEATS * CONFIG.heartbeat_interval_s + 0.01)
    assert r.balance.behind([w1]), "w1 hands off to balance; this view sees no reason"
    assert r.balance.behind([HintOrigin("w7#1")]), "a releaser this view does not know"
    assert not r.balance.behind([HintOrigin(ME)]), "its own hand-back says nothing"
    assert not r.balance.behind([])

    r.view({"w1#1": (20, now), "w5#1": (0, now)})  # the newcomer it had missed
    await r.clock.advance(BEHIND_RECHECK_BEATS * CONFIG.heartbeat_interval_s + 0.01)
    assert not r.balance.behind([w1]), "out of balance: the view agrees with the releaser"


async def test_a_leaving_workers_connections_are_split_over_the_others_alone() -> None:
    """GIVEN three workers at 12 and this newcomer at 0 WHEN w1's hints say it is leaving THEN
    this worker's target is w1's 12 (36 over the three that stay), not 9 (36 over four): the
    last 3 would otherwise be declined by everyone until w1's session ended."""
    r = Rig()
    now = r.clock.now_ms()
    r.view({"w1#1": (12, now), "w2#1": (12, now), "w4#1": (12, now)})
    assert r.balance.room() == 9

    r.balance.note_leaving([HintOrigin("w1#1", leaving=True)])
    assert r.balance.room() == 12
    await r.clock.advance(0.1)
    r.take(12, HintOrigin("w1#1", leaving=True), r.clock.now_ms() - 50)  # released after its report
    share = r.balance.share()
    assert share is not None
    assert (share.target, share.imbalanced) == (12, False), "balanced: w1's 12 counted once"


async def test_a_leaving_workers_hint_asks_for_a_fresh_view_and_is_open_to_all_after_a_while() -> (
    None
):
    r = Rig()
    now = r.clock.now_ms()
    r.view({"w1#1": (12, now), "w2#1": (12, now)})
    leaving = HintOrigin("w1#1", leaving=True)
    assert not r.balance.behind([leaving]), "read just now"
    await r.clock.advance(BEHIND_RECHECK_BEATS * CONFIG.heartbeat_interval_s + 0.01)
    assert r.balance.behind([leaving]), "a replacement may have joined since this view"

    r.balance.note_leaving([leaving])
    assert not r.balance.open_to_all(leaving, r.clock.now_ms())
    await r.clock.advance(LEAVING_GRACE_BEATS * CONFIG.heartbeat_interval_s)
    assert r.balance.open_to_all(leaving, r.clock.now_ms()), "nobody short took it: anyone may"
    assert not r.balance.open_to_all(HintOrigin("w2#1"), r.clock.now_ms())
    assert not r.balance.open_to_all(None, r.clock.now_ms())


async def test_a_leavers_hint_after_its_session_ended_is_still_a_released_connection() -> None:
    """A leaver ends its session once its handoff is done; hints it sent may still arrive.
    They name connections it released, not a dead session's it still owns: placed by share
    for the leaving grace, then open to all, never split as a death's (`takeover_budget`
    would count what the leaver last reported, most of it taken already, and decline). And a
    worker at its share receives again once a leaver it saw is past the grace."""
    r = Rig()
    now = r.clock.now_ms()
    r.view({"w1#1": (12, now), "w2#1": (12, now)})
    leaving = HintOrigin("w1#1", leaving=True)
    r.balance.note_leaving([leaving])
    assert not r.balance.leavers_open(r.clock.now_ms())

    await r.clock.advance(0.1)
    ended = r.clock.now_ms()
    lease = CONFIG.lease_ms
    r.balance.observe(
        [
            WorkerSession(ME, 1, ended + lease, r.held, CAPACITY, updated_at_ms=ended),
            WorkerSession("w1#1", 1, ended - 1, 0, CAPACITY, updated_at_ms=ended - 1),
            WorkerSession("w2#1", 1, ended + lease, 12, CAPACITY, updated_at_ms=ended),
        ],
        ended,
    )
    assert r.balance.dead("w1#1")
    assert not r.balance.open_to_all(leaving, r.clock.now_ms()), "by share within the grace"
    assert r.balance.open_to_all(HintOrigin("w1#1"), r.clock.now_ms()), "a death's: by capacity"

    await r.clock.advance(LEAVING_GRACE_BEATS * CONFIG.heartbeat_interval_s)
    assert r.balance.open_to_all(leaving, r.clock.now_ms())
    assert r.balance.leavers_open(r.clock.now_ms())


async def test_a_take_from_a_leaver_whose_session_ended_keeps_the_share() -> None:
    """GIVEN a view where the leaver w1 has ended (no entry) and w2 holds 20, this newcomer 0
    WHEN it takes 10 of w1's hints THEN it may take 5 more (30 over the two), not 90 (its
    capacity): w1 is out of the split either way, and its connections counted nowhere twice.
    (Taken as a releaser the view does not know, the view let go and the deploy's newcomers
    took twice their share.)"""
    r = Rig()
    now = r.clock.now_ms()
    leaving = HintOrigin("w1#1", leaving=True)
    r.balance.note_leaving([leaving])
    r.view({"w2#1": (20, now)})
    await r.clock.advance(0.1)
    r.take(10, leaving, r.clock.now_ms() - 50)
    assert r.balance.room() == 5


async def test_a_hint_meant_for_this_worker_is_taken_by_capacity_any_other_by_share() -> None:
    """By load a hand-off names the session it fits (HintOrigin.to): that session takes it
    by capacity (the releaser placed it there); to the others a light one is any hint, taken
    by their share, so it never waits for its one taker."""
    r = Rig()
    r.view({"w1#1": (10, r.clock.now_ms()), "w2#1": (10, r.clock.now_ms())})
    assert r.balance.meant_for_me(HintOrigin("w1#1", to=ME))
    assert not r.balance.meant_for_me(HintOrigin("w1#1", to="w2#1"))
    assert not r.balance.meant_for_me(HintOrigin("w1#1"))
    assert not r.balance.meant_for_me(None)
    now = r.clock.now_ms()
    light = HintOrigin("w1#1", to="w2#1", rate=0.5)  # the view's mean is 0: a cost of 1.5 < 2
    assert not r.balance.left_for_another("c1", light, now)
    assert not r.balance.left_for_another("c2", HintOrigin("w1#1", to="w2#1"), now), "no rate"


async def test_a_heavy_hint_meant_for_another_is_left_to_it_for_a_heartbeat_then_anyones() -> None:
    """A heavy hand-off (domain/balance.py `heavy`: twice the view's mean cost or more) named
    for another live session is left to it for ADDRESSED_GRACE_BEATS from when this worker
    first received it; past it, or with the addressee no longer live, it is anyone's by share.
    Taken by whoever polled first, a hot feed went to a worker already at its level, which
    handed its own on (the real-process skew bench by load)."""
    r = Rig()
    r.view({"w1#1": (10, r.clock.now_ms()), "w2#1": (10, r.clock.now_ms())})
    now = r.clock.now_ms()
    hot = HintOrigin("w1#1", to="w2#1", rate=1.0)  # cost 2: twice the mean of 1
    assert r.balance.left_for_another("c1", hot, now)
    assert not r.balance.left_for_another("c2", HintOrigin("w1#1", to=ME, rate=50.0), now)
    assert not r.balance.left_for_another("c3", HintOrigin("w1#1", to="gone#9", rate=50.0), now)

    grace_s = ADDRESSED_GRACE_BEATS * CONFIG.heartbeat_interval_s
    await r.clock.advance(grace_s - 0.01)
    assert r.balance.left_for_another("c1", hot, r.clock.now_ms()), "counted from first seen"
    await r.clock.advance(0.01)
    assert not r.balance.left_for_another("c1", hot, r.clock.now_ms())


async def test_a_leavers_heavy_hint_meant_for_another_is_left_to_it_for_the_leavers_grace() -> None:
    """A shutting-down worker's heavy stream names its taker (domain/balance.py
    `place_heavy`): the others leave it to that one for LEAVING_GRACE_BEATS, as long as a
    leaver's connections are placed by share, not a whole heartbeat (the handoff's 1 s)."""
    r = Rig()
    r.view({"w1#1": (10, r.clock.now_ms()), "w2#1": (10, r.clock.now_ms())})
    hot = HintOrigin("w1#1", leaving=True, to="w2#1", rate=50.0)
    assert r.balance.left_for_another("c1", hot, r.clock.now_ms())
    await r.clock.advance(LEAVING_GRACE_BEATS * CONFIG.heartbeat_interval_s)
    assert not r.balance.left_for_another("c1", hot, r.clock.now_ms())
