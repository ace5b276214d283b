"""The worker's view of the fleet's loads (application/worker/balance.py), on virtual time and
without a fleet: which view a balancing handoff may be decided on, how long after a handoff
the next waits, and when a view is too old to hold taking back. Each rule rested on one fleet
test before (a handoff decided on the first view, a threshold in seconds read as
milliseconds: only test_three_joining_workers_take_their_share_gracefully failed on them)."""

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from application.config import WorkerConfig
from application.worker.balance import Balance
from domain import WorkerSession
from tests.support.leases import worker_context

CAPACITY = 10
# By count: these read `hand_off_now` as the number to hand off, which by count it is; by
# load it is only the most that may go (domain/balance.py `pick_hand_offs` chooses). The
# timing rules they test are the same for both.
CONFIG = WorkerConfig(max_connections=CAPACITY, balance_by="count")
ME, OTHER = "me#1", "other#1"


class Rig:
    """This worker's Balance, with what it holds now set by the test."""

    def __init__(self, held: int) -> None:
        self.clock = FakeClock()
        self.held = held
        ctx = worker_context(self.clock, InMemoryMetrics(), config=CONFIG)
        self.balance = Balance(ctx, lambda: ME, lambda: self.held)

    def view(self, other_held: int, other_reported_at_ms: int) -> None:
        """The sessions list as the reconcile loop reads it now: this worker and one other,
        whose load is as it last reported it."""
        now, lease = self.clock.now_ms(), CONFIG.lease_ms
        sessions = [
            WorkerSession(ME, 1, now + lease, self.held, CAPACITY, updated_at_ms=now),
            WorkerSession(
                OTHER, 1, now + lease, other_held, CAPACITY, updated_at_ms=other_reported_at_ms
            ),
        ]
        self.balance.observe(sessions, now)


async def test_a_handoff_is_made_only_on_a_view_reported_after_the_first_that_wanted_it() -> None:
    """GIVEN this worker full and the other empty WHEN the first view shows it THEN nothing is
    handed off on it; nor on a later view whose other load was reported before that first
    view (a load moved just before a view is misreported in it); only on one reported after."""
    r = Rig(held=10)
    first_view_ms = r.clock.now_ms()
    r.view(other_held=0, other_reported_at_ms=first_view_ms - 100)
    assert r.balance.hand_off_now() == 0, "never decided on the first view"

    await r.clock.advance(1)
    r.view(other_held=0, other_reported_at_ms=first_view_ms - 100)  # no report since
    assert r.balance.hand_off_now() == 0

    await r.clock.advance(1)
    r.view(other_held=0, other_reported_at_ms=first_view_ms)  # reported at the first view
    assert r.balance.hand_off_now() == 5, "down to the even share, on a second view"


async def test_a_view_in_balance_forgets_the_wish_and_the_next_wish_waits_for_its_own_view() -> (
    None
):
    r = Rig(held=10)
    r.view(other_held=0, other_reported_at_ms=r.clock.now_ms())
    assert r.balance.hand_off_now() == 0  # wanted, first view

    await r.clock.advance(1)
    r.held = 5
    r.view(other_held=5, other_reported_at_ms=r.clock.now_ms())
    assert r.balance.hand_off_now() == 0  # balanced: the wish is gone

    await r.clock.advance(1)
    r.held = 10
    r.view(other_held=0, other_reported_at_ms=r.clock.now_ms())
    assert r.balance.hand_off_now() == 0, "a first view again"
    await r.clock.advance(1)
    r.view(other_held=0, other_reported_at_ms=r.clock.now_ms())
    assert r.balance.hand_off_now() == 5


async def test_after_a_handoff_the_next_waits_a_heartbeat_for_the_taker_to_report_it() -> None:
    """The takers report what they took at their next renew, a heartbeat (1 s) later at most:
    a view reported earlier than that would shed the same excess twice."""
    r = Rig(held=10)
    r.view(other_held=0, other_reported_at_ms=r.clock.now_ms())
    r.balance.hand_off_now()
    await r.clock.advance(1)
    r.view(other_held=0, other_reported_at_ms=r.clock.now_ms())
    assert r.balance.hand_off_now() == 5
    handed_off_ms = r.clock.now_ms()
    r.balance.handed_off(handed_off_ms)

    heartbeat_ms = int(CONFIG.heartbeat_interval_s * 1000)
    await r.clock.advance(2)
    r.view(other_held=0, other_reported_at_ms=handed_off_ms + heartbeat_ms - 1)
    assert r.balance.hand_off_now() == 0, "the taker has not reported a heartbeat after it"
    r.view(other_held=0, other_reported_at_ms=handed_off_ms + heartbeat_ms)
    assert r.balance.hand_off_now() == 5


async def test_a_view_older_than_two_leases_no_longer_holds_taking_back() -> None:
    """GIVEN a view in which the other worker holds everything (this one may take only up to
    its share) WHEN no newer view comes (the store cannot be listed) THEN the share holds for
    two leases, and after that this worker takes by capacity alone, so that a stale view
    never leaves connections orphaned."""
    r = Rig(held=0)
    r.view(other_held=10, other_reported_at_ms=r.clock.now_ms())
    assert r.balance.room() == 5

    two_leases_s = 2 * CONFIG.lease_ms / 1000
    await r.clock.advance(two_leases_s)
    assert r.balance.room() == 5
    await r.clock.advance(0.01)
    assert r.balance.room() == CAPACITY
    assert r.balance.hand_off_now() == 0
