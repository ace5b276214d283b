"""What a ConnectionSession reports as it ends or meets a gap, on virtual time: the logs that
say why a hint went out once or not at all, the time a stream is recorded as ended, the
persisted back-off after an upstream failure (and the failure count it grows with), and the
loud log of messages lost upstream. The mutation run of application/worker/session.py found
each of these unasserted: its lines could be changed without any test noticing."""

import logging
from collections.abc import Sequence

import pytest

from application.errors import QueueUnavailable
from application.ports import HintOrigin, NotificationQueue
from application.ports.metrics import MESSAGES_SKIPPED, UPSTREAM_GIVE_UPS
from domain import NO_OWNER, StreamEnded, UpstreamFailed
from tests.support.fleet import Fleet


class FailingSends:
    """The fleet's queue, with this worker's sends failing: every one (`delayed_only=False`)
    or only the copy a hint sends a second later (application/hints.py)."""

    def __init__(self, inner: NotificationQueue, *, delayed_only: bool) -> None:
        self._inner = inner
        self._delayed_only = delayed_only
        self.receive = inner.receive
        self.release = inner.release
        self.delete = inner.delete

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        if delay_s or not self._delayed_only:
            raise QueueUnavailable("queue down (test)")
        await self._inner.send(connection_ids, delay_s=delay_s, copy=copy, origin=origin)


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == text]


async def _hand_off_c1(fleet: Fleet, queue: FailingSends) -> None:
    """c1 streamed by worker "a" (on `queue`), then handed off to balance: a hand-back of a
    connection still wanted, which the session hints itself."""
    a = fleet.add_worker("a", queue=queue)
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    assert a.worker.sessions.hand_off(1) == ["c1"]
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") is None, 5)
    await fleet.clock.advance(0.5)  # the hint, after the release


async def test_a_hint_lost_after_a_hand_back_is_logged_with_its_connection(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    await _hand_off_c1(fleet, FailingSends(fleet.queue, delayed_only=False))

    [record] = _logged(caplog, "hint after hand-back not sent: queue down (test)")
    assert record.levelno == logging.WARNING
    assert record.__dict__["connection_id"] == "c1"


async def test_a_hints_lost_copy_is_logged_with_the_connection_that_sent_it(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await _hand_off_c1(fleet, FailingSends(fleet.queue, delayed_only=True))

    # The first round went out: the hand-back's own warning is not logged.
    assert not [r for r in caplog.records if r.getMessage().startswith("hint after hand-back")]
    [record] = _logged(caplog, "1 hint(s) went out once, not twice: queue down (test)")
    assert record.__dict__["connection_id"] == "c1"


async def test_a_stream_that_ends_is_recorded_ended_when_it_ended(fleet: Fleet) -> None:
    fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.stream(url).total = 20
    await fleet.clock.run_until(lambda: fleet.store.operations.get("EndStream", 0) == 1, 10)

    [ended] = [e for e in await fleet.store.history("c1") if isinstance(e, StreamEnded)]
    # Recorded in the step it happened in (run_until advances 10 ms at a time).
    assert isinstance(ended.at_ms, int)
    assert fleet.clock.now_ms() - 10 <= ended.at_ms <= fleet.clock.now_ms()


async def _given_up(fleet: Fleet, reports: int) -> UpstreamFailed:
    """Wait until the upstream was given up on `reports` times in all; the last report."""
    await fleet.clock.run_until(
        lambda: fleet.store.operations.get("ReportUpstreamFailure", 0) == reports, 120, 0.05
    )
    state = await fleet.store.get("c1")
    assert state is not None
    assert state.owner == NO_OWNER
    failed = [e for e in await fleet.store.history("c1") if isinstance(e, UpstreamFailed)]
    assert len(failed) == reports
    report = failed[-1]
    # What the store keeps is what was reported.
    assert (state.failures, state.not_before_ms) == (report.failures, report.not_before_ms)
    return report


def _backed_off_for(report: UpstreamFailed, failures: int, base_s: float) -> None:
    """The persisted back-off is the one for `failures` (application/worker/backoff.py:
    uniform in [cap/2, cap], cap = base * 2**(failures-1)): it grows with the same count the
    domain keeps, so a session that miscounts backs off too long or too short."""
    cap_ms = base_s * 2 ** (failures - 1) * 1000
    assert report.failures == failures
    assert cap_ms / 2 <= report.not_before_ms - report.at_ms <= cap_ms, report


async def test_an_upstream_refused_twice_backs_off_longer_the_second_time(fleet: Fleet) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.stream(url).rejected = True  # 403: given up on at the first open
    base_s = fleet.config.poison_backoff_base_s

    _backed_off_for(await _given_up(fleet, 1), 1, base_s)
    assert a.metrics.counters[UPSTREAM_GIVE_UPS] == 1
    # Taken again once the back-off ended, and refused again: no progress in between.
    _backed_off_for(await _given_up(fleet, 2), 2, base_s)
    assert a.metrics.counters[UPSTREAM_GIVE_UPS] == 2


async def _failed_again_after_streaming(fleet: Fleet, streamed_s: float) -> UpstreamFailed:
    """c1 given up on once, then taken again, streamed for `streamed_s` (messages stored),
    then dropped and refused on reconnecting: the second report."""
    fleet.add_worker("a")
    url = await fleet.start("c1")
    stream = fleet.upstream.stream(url)
    stream.rejected = True
    await _given_up(fleet, 1)

    stream.rejected = False
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 60)
    await fleet.clock.advance(streamed_s)
    stream.drop_after, stream.rejected = 0, True  # dropped, then refused on reconnecting
    report = await _given_up(fleet, 2)

    state = await fleet.store.get("c1")
    assert state is not None
    assert state.checkpoint_seq > 0, "the lease made progress"
    return report


async def test_an_upstream_that_streamed_well_before_failing_backs_off_from_one(
    fleet: Fleet,
) -> None:
    """GIVEN a connection that failed once WHEN its next lease streams for
    `upstream_healthy_s`, storing messages, before the upstream fails again THEN the count
    restarts at one, and so does the back-off."""
    report = await _failed_again_after_streaming(fleet, fleet.config.upstream_healthy_s)

    _backed_off_for(report, 1, fleet.config.poison_backoff_base_s)


async def test_an_upstream_that_fails_soon_after_each_connect_backs_off_longer_each_time(
    fleet: Fleet,
) -> None:
    """GIVEN a connection given up on once WHEN its next lease stores a few messages and then
    the upstream fails again, before it streamed for `upstream_healthy_s` THEN that progress
    does not restart the count: a poison that sends good messages first still backs off
    longer each time."""
    report = await _failed_again_after_streaming(fleet, 2)  # ~20 messages stored

    _backed_off_for(report, 2, fleet.config.poison_backoff_base_s)


async def test_messages_lost_upstream_are_logged_with_their_seqs_and_counted(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.stream(url).lost.update({13, 14, 15})
    await fleet.clock.run_until(lambda: len(fleet.sink.seqs("c1")) >= 20, 10)

    [record] = _logged(caplog, "upstream skipped seqs 13..15: messages lost upstream")
    assert record.levelno == logging.ERROR
    assert record.__dict__["connection_id"] == "c1"
    assert a.metrics.counters[MESSAGES_SKIPPED] == 3
