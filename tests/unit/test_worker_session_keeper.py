"""SessionKeeper's trust rule on virtual time, beyond what the fleet tests reach (the
mutation run of session_keeper.py found these unasserted)."""

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Sequence

import attrs
import pytest

from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.store import InMemoryConnectionStore
from application.config import WorkerConfig
from application.errors import WorkerIdInUse
from application.ports.metrics import LEASES_LOST, RENEW_LATENCY_MS, SELF_FENCES, STORE_ERRORS
from application.ports.store import SessionResult
from application.worker.session_keeper import SessionKeeper, session_id_of
from domain import InvalidCommand, RenewSession, SessionCommand, SessionEnded, WorkerSession
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


# -- the rest of the keeper's contract (the second pass over session_keeper.py's survivors) ----


class Recorder(FaultInjectingStore):
    """The fault injector, recording when each session call was made and how many ended. A
    call cancelled while stalled ends a few loop turns later, as a real client's cleanup does."""

    def __init__(self, inner: InMemoryConnectionStore, clock: FakeClock) -> None:
        super().__init__(inner, clock)
        self.calls: list[tuple[str, float]] = []
        self.ended = 0

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        self.calls.append((type(command).__name__, self._clock.monotonic()))
        try:
            return await super().execute_session(command, now_ms)
        except asyncio.CancelledError:
            for _ in range(3):
                await asyncio.sleep(0)
            raise
        finally:
            self.ended += 1

    def times(self, op: str) -> list[float]:
        return [at for name, at in self.calls if name == op]


@contextlib.asynccontextmanager
async def heartbeat(keeper: SessionKeeper) -> AsyncIterator["asyncio.Task[None]"]:
    """The keeper's heartbeat running for the block, cancelled and awaited after it."""
    beating = asyncio.create_task(keeper.run())
    try:
        yield beating
    finally:
        beating.cancel()
        await asyncio.wait([beating])


@attrs.frozen
class Rig:
    clock: FakeClock
    metrics: InMemoryMetrics
    store: Recorder
    inner: InMemoryConnectionStore
    keeper: SessionKeeper


def rig(
    *,
    config: WorkerConfig | None = None,
    load: int = 0,
    recorder: Callable[[InMemoryConnectionStore, FakeClock], Recorder] = Recorder,
) -> Rig:
    clock, metrics = FakeClock(), InMemoryMetrics()
    ctx = worker_context(clock, metrics, config=config)
    inner = ctx.store
    assert isinstance(inner, InMemoryConnectionStore)
    store = recorder(inner, clock)
    keeper = SessionKeeper(attrs.evolve(ctx, store=store), lambda: load)
    return Rig(clock, metrics, store, inner, keeper)


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def backoff_gaps_ok(times: list[float], base_s: float) -> bool:
    """Retry n waits within [cap/2, cap], cap = min(1 s, base * 2^(n-1)) (the jitter is seeded
    but not assumed)."""
    gaps = [b - a for a, b in itertools.pairwise(times)]
    caps = [min(1.0, base_s * 2**n) for n in range(len(gaps))]
    return all(cap / 2 - 1e-9 <= gap <= cap + 1e-9 for gap, cap in zip(gaps, caps, strict=True))


HALF_SECOND_BEATS = WorkerConfig(heartbeat_interval_s=0.5)  # back-off base 0.025 s


async def test_opening_retries_an_unreachable_store_with_growing_capped_delays(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.session_keeper")
    r = rig(config=HALF_SECOND_BEATS)
    r.store.fail_next("OpenSession", 8)

    opening = asyncio.create_task(r.keeper.open())
    await r.clock.run_until(opening.done, timeout_s=10)
    opening.result()

    attempts = r.store.times("OpenSession")
    assert len(attempts) == 9
    assert backoff_gaps_ok(attempts, 0.025)
    assert attempts[-1] - attempts[-2] > 0.5  # the 1 s cap was reached (not a larger one)
    assert r.keeper.session_id == "w1#9"  # an unreachable store refuses nothing: ids move on
    assert r.keeper.trusts(r.keeper.session_id)
    assert r.metrics.counters[STORE_ERRORS] == 8
    warnings = messages(caplog, logging.WARNING)
    assert warnings == 8 * [
        "opening the worker session failed, retrying: injected failure (OpenSession)"
    ]


async def test_opening_says_which_session_opened_and_for_which_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.session_keeper")
    r = rig()
    assert r.keeper.last_renewed is None  # the health check reads None as "never renewed"
    assert r.keeper.remaining_s() == 0.0  # nothing is trusted before the session opens

    await r.keeper.open()

    (record,) = caplog.records
    assert record.getMessage() == "worker session w1#1 opened"
    assert record.__dict__["worker_id"] == "w1"
    assert r.keeper.last_renewed == 0.0


class Rival(Recorder):
    """Another process under the same worker id opens `ids` right after this keeper's first
    look at the sessions (the race the look alone cannot close), `ago_ms` before now."""

    def __init__(
        self, inner: InMemoryConnectionStore, clock: FakeClock, ids: list[str], ago_ms: int = 0
    ) -> None:
        super().__init__(inner, clock)
        self.ids, self.ago_ms = ids, ago_ms

    async def list_sessions(self) -> Sequence[WorkerSession]:
        listed = await super().list_sessions()
        for session_id in self.ids:
            at_ms = self._clock.now_ms() - self.ago_ms
            await self._inner.open_session(session_id, 4_000, 10, at_ms)
        return listed


def rival(ids: list[str], ago_ms: int = 0) -> Callable[[InMemoryConnectionStore, FakeClock], Rival]:
    return functools.partial(Rival, ids=ids, ago_ms=ago_ms)


async def test_opening_skips_a_session_id_used_by_a_dead_session_up_to_three_times() -> None:
    r = rig(recorder=rival([session_id_of("w1", n) for n in (1, 2, 3)], ago_ms=60_000))

    await r.keeper.open()

    assert r.keeper.session_id == "w1#4"
    assert r.keeper.trusts("w1#4")


async def test_opening_gives_up_on_a_fourth_refused_session_id() -> None:
    r = rig(recorder=rival([session_id_of("w1", n) for n in (1, 2, 3, 4)], ago_ms=60_000))

    with pytest.raises(InvalidCommand):
        await r.keeper.open()
    assert not r.keeper.session_id


async def test_a_worker_id_with_a_live_session_is_refused_at_the_first_open() -> None:
    """GIVEN another process streaming under worker id w1 (session w1#3 live), WHEN a keeper
    of w1 opens, THEN it is refused by name, before it opens anything."""
    r = rig()
    now = r.clock.now_ms()
    await r.inner.open_session("w1#3", 4_000, 10, now)
    await r.inner.open_session("w10#1", 4_000, 10, now)  # another id with the same prefix

    with pytest.raises(WorkerIdInUse) as refused:
        await r.keeper.open()

    message = str(refused.value)
    assert "worker id 'w1' is in use: its session 'w1#3' is live (its lease runs 4.0s" in message
    assert "wsfleet end-session --worker w1" in message
    assert not r.keeper.session_id
    assert r.store.times("OpenSession") == []


async def test_dead_sessions_of_the_same_worker_id_are_numbered_past() -> None:
    r = rig()
    now = r.clock.now_ms()
    for n in (1, 2):
        await r.inner.open_session(session_id_of("w1", n), 4_000, 10, now - 60_000)  # expired
    await r.inner.open_session("w1#5", 4_000, 10, now)
    await r.inner.end_session("w1#5", "shutdown", now)

    await r.keeper.open()

    assert r.keeper.session_id == "w1#6"
    assert r.store.times("OpenSession") == [0.0]  # no used id was tried


async def test_a_rival_that_wins_the_race_for_the_id_is_refused() -> None:
    """Two processes under one id start together: both find no live session; the one whose
    open is refused finds the id live, and stops."""
    r = rig(recorder=rival(["w1#1"]))

    with pytest.raises(WorkerIdInUse, match="its session 'w1#1' is live"):
        await r.keeper.open()
    assert not r.keeper.session_id


async def test_a_fenced_session_is_ended_as_fenced_before_the_next_one_opens() -> None:
    r = rig()
    await r.keeper.open()
    await r.keeper.open()

    ended = (await r.inner.session_history("w1#1"))[-1]
    assert isinstance(ended, SessionEnded)
    assert ended.reason == "fenced"


async def test_ending_fences_the_session_and_ends_it_in_the_store() -> None:
    r = rig()
    await r.keeper.open()

    await r.keeper.end("shutdown")

    assert r.keeper.fenced().done()
    assert not r.keeper.trusts("w1#1")
    assert r.keeper.remaining_s() == 0.0
    ended = (await r.inner.session_history("w1#1"))[-1]
    assert isinstance(ended, SessionEnded)
    assert ended.reason == "shutdown"


async def test_an_end_the_store_does_not_answer_is_logged_and_left_to_expire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.session_keeper")
    r = rig()
    await r.keeper.open()
    r.store.fail_next("EndSession")

    await r.keeper.end("shutdown")

    assert not r.keeper.trusts("w1#1")
    assert messages(caplog, logging.WARNING) == [
        "ending the worker session failed (it will expire): injected failure (EndSession)"
    ]


async def test_self_fencing_counts_the_fence_and_the_connections_it_cost_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.session_keeper")
    r = rig(load=5)
    await r.keeper.open()
    fenced = r.keeper.fenced()
    r.store.stall_next("RenewSession", 100.0, n=100)  # renewals stuck on the store

    async with heartbeat(r.keeper):
        await r.clock.advance(TRUSTED_S)
        assert not r.keeper.trusts("w1#1")
        assert not r.keeper.trusts("w1#1")  # a read: asking again fences nothing more
        await r.clock.advance(0.01)

    assert fenced.done()
    assert r.metrics.counters[SELF_FENCES] == 1
    assert r.metrics.counters[LEASES_LOST] == 5
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage() == "session no longer trusted: self-fencing"
    assert record.__dict__["worker_id"] == "w1"


async def test_a_refused_heartbeat_fences_at_once_and_the_next_session_beats_from_its_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.session_keeper")
    r = rig(load=2)
    await r.keeper.open()
    async with heartbeat(r.keeper):
        await r.clock.advance(0.5)
        await r.inner.end_session("w1#1", "reaped", r.clock.now_ms())  # someone thought us dead

        await r.clock.advance(0.5)  # the beat at 1.0 s is refused

        assert r.keeper.fenced().done()
        assert "worker session is no longer live: fencing every connection" in messages(
            caplog, logging.WARNING
        )
        assert r.metrics.counters[LEASES_LOST] == 2
        await r.clock.advance(1.0)  # the loop wakes on its next beat and opens another
        assert r.keeper.session_id == "w1#2"
        opened = r.store.times("OpenSession")[-1]
        await r.clock.advance(0.99)
        assert r.store.times("RenewSession")[-1] < opened  # not at once
        await r.clock.advance(0.01)
        assert r.store.times("RenewSession")[-1] == pytest.approx(opened + 1.0)


async def test_heartbeats_beat_on_each_interval_from_the_open() -> None:
    r = rig()
    await r.keeper.open()
    async with heartbeat(r.keeper):
        await r.clock.advance(0.99)
        assert r.store.times("RenewSession") == []
        await r.clock.advance(0.01)
        assert r.store.times("RenewSession") == [1.0]  # on the beat, not a moment after
        await r.clock.advance(2.0)
        assert r.store.times("RenewSession") == [1.0, 2.0, 3.0]
        assert r.keeper.last_renewed == 3.0


async def test_a_frozen_process_beats_once_on_waking_then_on_the_interval_no_burst() -> None:
    r = rig()
    await r.keeper.open()
    async with heartbeat(r.keeper) as beating:
        await r.clock.advance(2.5, step_s=2.5)  # asleep past two beats, still within the trust
        assert r.store.times("RenewSession") == [2.5]
        await r.clock.advance(0.99)
        assert r.store.times("RenewSession") == [2.5]
        await r.clock.advance(0.01)
        assert r.store.times("RenewSession") == [2.5, 3.5]
        assert not beating.done()


async def test_a_failed_heartbeat_is_retried_with_growing_delays_and_times_its_success(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.session_keeper")
    r = rig(config=HALF_SECOND_BEATS)
    await r.keeper.open()
    r.store.fail_next("RenewSession", 4)
    async with heartbeat(r.keeper):
        await r.clock.advance(0.9)  # the retries end before the next beat (1.0 s)

        tries = r.store.times("RenewSession")
        assert len(tries) == 5
        assert tries[0] == 0.5
        assert backoff_gaps_ok(tries, 0.025)
        assert r.keeper.last_renewed == tries[-1]
        assert r.keeper.remaining_s() == pytest.approx(tries[-1] + TRUSTED_S - 0.9)
        assert r.metrics.counters[STORE_ERRORS] == 4
        assert messages(caplog, logging.WARNING) == 4 * [
            "session renew failed, retrying within the lease: injected failure (RenewSession)"
        ]


async def test_a_heartbeats_latency_is_timed_in_milliseconds() -> None:
    r = rig()
    await r.keeper.open()
    r.store.stall_next("RenewSession", 0.02)
    async with heartbeat(r.keeper):
        await r.clock.advance(1.5)

        assert r.metrics.timings[RENEW_LATENCY_MS] == [pytest.approx(20.0)]


async def test_a_failed_heartbeat_is_not_retried_once_a_later_one_succeeded() -> None:
    r = rig()
    await r.keeper.open()
    r.store.stall_next("RenewSession", 1.2)  # the 1.0 s beat is answered at 2.2 s...
    async with heartbeat(r.keeper):
        await r.clock.advance(2.1)  # ...after the 2.0 s beat succeeded...
        r.store.fail_next("RenewSession")  # ...with a failure

        await r.clock.advance(0.8)

        assert r.store.times("RenewSession") == [1.0, 2.0]
        assert r.inner.operations["RenewSession"] == 1


async def test_a_late_answer_to_an_older_heartbeat_does_not_move_the_last_renewal_back() -> None:
    r = rig()
    await r.keeper.open()
    r.store.stall_next("RenewSession", 1.5)  # the 1.0 s beat answers at 2.5 s, after 2.0 s's
    async with heartbeat(r.keeper):
        await r.clock.advance(2.6)

        assert r.inner.operations["RenewSession"] == 2
        assert r.keeper.last_renewed == 2.0
        assert r.keeper.remaining_s() == pytest.approx(2.0 + TRUSTED_S - 2.6)


async def test_no_more_than_three_heartbeats_wait_for_the_store_at_once() -> None:
    r = rig(config=WorkerConfig(lease_ms=10_000))  # trusted 9 s: many beats
    await r.keeper.open()
    r.store.stall_next("RenewSession", 100.0, n=10)
    async with heartbeat(r.keeper):
        await r.clock.advance(8.5)

        assert r.store.times("RenewSession") == [1.0, 2.0, 3.0]


async def test_a_heartbeat_stops_retrying_when_the_trust_runs_out() -> None:
    r = rig()
    await r.keeper.open()
    r.store.outage = True
    async with heartbeat(r.keeper):
        await r.clock.advance(TRUSTED_S + 0.5)

        assert max(r.store.times("RenewSession")) < TRUSTED_S
        assert r.keeper.fenced().done()


async def test_a_heartbeat_failing_with_a_bug_fails_the_keeper_with_that_error() -> None:
    class Buggy(InMemoryConnectionStore):
        async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
            if isinstance(command, RenewSession):
                raise RuntimeError("a bug in the store adapter")
            return await super().execute_session(command, now_ms)

    clock = FakeClock()
    ctx = attrs.evolve(worker_context(clock, InMemoryMetrics()), store=Buggy())
    keeper = SessionKeeper(ctx, lambda: 0)
    await keeper.open()
    beating = asyncio.create_task(keeper.run())

    await clock.advance(2.5)  # raised on the loop's next wake-up (the 2.0 s beat)

    assert beating.done()
    with pytest.raises(RuntimeError, match="a bug in the store adapter"):
        beating.result()


async def test_cancelling_the_heartbeat_cancels_and_awaits_the_renewals_in_flight() -> None:
    r = rig()
    await r.keeper.open()
    r.store.stall_next("RenewSession", 100.0, n=2)
    beating = asyncio.create_task(r.keeper.run())
    await r.clock.advance(2.5)
    assert len(r.store.times("RenewSession")) == 2
    ended_before = r.store.ended

    beating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await beating

    assert r.store.ended == ended_before + 2  # both stalled calls ended, before run returned


async def test_a_fence_is_noticed_at_the_trust_deadline_not_at_the_next_beat() -> None:
    """GIVEN the default beat (1 s) and margin, a renewal retried once (so trust no longer ends
    on a beat) and every later one stuck on the store WHEN the trust runs out THEN the keeper
    fences at that instant, between two beats: waking only on the beat would spend the
    self-fence margin with every quiet connection still subscribed."""
    r = rig()
    await r.keeper.open()
    fenced = r.keeper.fenced()
    r.store.fail_next("RenewSession")
    async with heartbeat(r.keeper):
        await r.clock.advance(1.5)  # the 1.0 s beat failed, its retry landed
        renewed = r.keeper.last_renewed
        assert renewed is not None
        assert 1.0 < renewed < 1.5
        r.store.stall_next("RenewSession", 100.0, n=10)  # the next beats never answer
        deadline = renewed + TRUSTED_S
        assert deadline % 1.0 > 0.01, "the deadline falls between two beats"

        await r.clock.advance(deadline - 0.005 - r.clock.monotonic(), step_s=0.001)
        assert not fenced.done()
        await r.clock.advance(0.015, step_s=0.001)

        assert fenced.done(), "fenced at the deadline, not at the next beat"
        assert r.metrics.counters[SELF_FENCES] == 1
