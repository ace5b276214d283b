"""The Clock contract: one suite, run unchanged against every clock — the system clock on real
time, the virtual FakeClock driven by a test-side ticker, and SkewedClock around it.

`timeout` is the one with semantics to get right: the heartbeat relies on it to abandon a
renew stuck on an unreachable store when its lease stops being trusted."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import pytest

from adapters.faults.clock import SkewedClock
from adapters.memory.clock import FakeClock
from adapters.system.clock import SystemClock
from application.ports import Clock

T = TypeVar("T")

SHORT_S = 0.05  # real seconds on the system clock; virtual on the others
LONG_S = 2.0


@attrs.frozen
class ClockUnderTest:
    clock: Clock
    run: Callable[[Awaitable[object]], Awaitable[object]]  # runs it while time passes


async def _on_real_time(work: Awaitable[object]) -> object:
    return await work


def _driven(fake: FakeClock) -> Callable[[Awaitable[object]], Awaitable[object]]:
    async def run(work: Awaitable[object]) -> object:
        task = asyncio.ensure_future(work)
        while not task.done():
            await fake.advance(0.01)
        return await task

    return run


@pytest.fixture(params=["system", "fake", "skewed"])
def under_test(request: pytest.FixtureRequest) -> ClockUnderTest:
    if request.param == "system":
        return ClockUnderTest(SystemClock(), _on_real_time)
    fake = FakeClock()
    clock: Clock = fake if request.param == "fake" else SkewedClock(fake, skew_ms=-5_000)
    return ClockUnderTest(clock, _driven(fake))


async def elapsed(clock: Clock, work: Awaitable[T]) -> tuple[T, float]:
    began = clock.monotonic()
    result = await work
    return result, clock.monotonic() - began


async def test_sleep_returns_once_that_much_monotonic_time_has_passed(
    under_test: ClockUnderTest,
) -> None:
    clock = under_test.clock
    outcome = await under_test.run(elapsed(clock, clock.sleep(SHORT_S)))
    assert isinstance(outcome, tuple)
    assert outcome[1] >= SHORT_S - 1e-3


async def test_a_block_that_outlasts_its_timeout_is_cancelled_with_timeout_error(
    under_test: ClockUnderTest,
) -> None:
    clock = under_test.clock
    reached_the_end = False

    async def block() -> float:
        nonlocal reached_the_end
        began = clock.monotonic()
        with contextlib.suppress(TimeoutError):
            async with clock.timeout(SHORT_S):
                await clock.sleep(LONG_S)
                reached_the_end = True
        return clock.monotonic() - began

    took = await under_test.run(block())
    assert not reached_the_end
    assert isinstance(took, float)
    assert SHORT_S - 1e-3 <= took < LONG_S


async def test_a_block_that_finishes_in_time_keeps_its_result(under_test: ClockUnderTest) -> None:
    clock = under_test.clock

    async def block() -> str:
        async with clock.timeout(LONG_S):
            await clock.sleep(SHORT_S)
            return "done"

    assert await under_test.run(block()) == "done"
    # And the deadline does not fire later, into whatever the task does next.
    await under_test.run(clock.sleep(LONG_S))


async def test_a_timeout_of_zero_or_less_expires_at_the_first_wait(
    under_test: ClockUnderTest,
) -> None:
    clock = under_test.clock
    for seconds in (0.0, -1.0):

        async def block(seconds: float = seconds) -> None:
            async with clock.timeout(seconds):
                await clock.sleep(LONG_S)

        with pytest.raises(TimeoutError):
            await under_test.run(block())


async def test_cancelling_the_task_inside_a_timeout_is_a_cancellation_not_a_timeout(
    under_test: ClockUnderTest,
) -> None:
    clock = under_test.clock
    entered = asyncio.Event()

    async def block() -> None:
        async with clock.timeout(LONG_S):
            entered.set()
            await asyncio.Event().wait()

    async def cancel_it() -> None:
        task = asyncio.ensure_future(block())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    await under_test.run(cancel_it())
