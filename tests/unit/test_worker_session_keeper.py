"""SessionKeeper's trust rule on virtual time, beyond what the fleet tests reach (the
mutation run of session_keeper.py found these unasserted)."""

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from application.config import WorkerConfig
from application.worker.session_keeper import SessionKeeper
from tests.support.leases import worker_context

TRUSTED_S = WorkerConfig().trusted_s


async def test_a_previous_session_is_never_trusted_once_a_new_one_is_open() -> None:
    """Connections acquired under the old session must not be read or written under the new
    one, though the new one is trusted and the old one was never fenced by a deadline."""
    clock = FakeClock()
    keeper = SessionKeeper(worker_context(clock, InMemoryMetrics()), lambda: 0)
    await keeper.open()
    first = keeper.session_id
    await keeper.open()  # e.g. after its session was refused: a new id

    assert keeper.session_id != first
    assert keeper.trusts(keeper.session_id)
    assert not keeper.trusts(first)


async def test_what_remains_of_the_trust_is_counted_down_and_never_below_zero() -> None:
    clock = FakeClock()
    keeper = SessionKeeper(worker_context(clock, InMemoryMetrics()), lambda: 0)
    await keeper.open()

    await clock.advance(1.0)
    assert keeper.remaining_s() == TRUSTED_S - 1.0
    await clock.advance(TRUSTED_S)
    assert keeper.remaining_s() == 0.0
    assert not keeper.trusts(keeper.session_id)
