"""The boundary checks of a ConnectionSession, on virtual time: which seqs and data it takes,
the exact reason it gives when it refuses what an upstream sent (the reason is persisted with
the back-off, and is what an operator reads), the back-off it persists, how it tells a stream
that numbers its messages from one that numbers nothing, and what it logs as it hands a
connection back or fails unexpectedly. The mutation run of application/worker/session.py found
each of these unasserted: its lines could be changed without any test noticing."""

import logging
from collections.abc import Sequence

import pytest

from adapters.memory.sink import InMemoryMessageSink
from application.config import WorkerConfig
from application.ports import UpstreamMessage
from application.ports.metrics import (
    MESSAGES_REJECTED,
    MESSAGES_SKIPPED,
    REPLAYS_DROPPED,
    SEQ_JUMPS,
)
from application.ports.sink import MAX_SEQ
from application.url_policy import UrlPolicy
from application.worker.session import SessionEnd
from application.worker.session_keeper import worker_of
from domain import NO_OWNER, Connection, UpstreamFailed
from tests.support.fleet import Fleet, Member


async def _state(fleet: Fleet, cid: str) -> Connection:
    state = await fleet.store.get(cid)
    assert state is not None
    return state


async def _given_up(fleet: Fleet, cid: str, within_s: float = 10) -> UpstreamFailed:
    """Wait until `cid` is given up on (once); the UpstreamFailed event the store keeps."""
    await fleet.clock.run_until(
        lambda: fleet.store.operations.get("ReportUpstreamFailure", 0) == 1, within_s
    )
    state = await _state(fleet, cid)
    assert state.owner == NO_OWNER, state
    [failed] = [e for e in await fleet.store.history(cid) if isinstance(e, UpstreamFailed)]
    return failed


async def _still_streamed_by(fleet: Fleet, cid: str, name: str) -> None:
    state = await _state(fleet, cid)
    assert worker_of(state.owner) == name, state
    assert state.failures == 0, state


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == text]


async def _bad_at_20(fleet: Fleet, extra: UpstreamMessage) -> tuple[Member, str]:
    """ "bad" streamed by worker "a", its upstream sending `extra` just before seq 20."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "bad")
    fleet.upstream.streams[url].inject = {20: [extra]}
    return a, url


@pytest.mark.parametrize(
    ("extra", "counter", "reason"),
    [
        (
            UpstreamMessage(None, "<html>"),
            MESSAGES_REJECTED,
            "a message without a seq in a sequenced stream",
        ),
        # A bool is an int to Python, not to the sink: True would be taken as seq 1.
        (UpstreamMessage(True, "x"), MESSAGES_REJECTED, "seq True is not an integer in 0..2^63-1"),
        (
            UpstreamMessage(False, "x"),
            MESSAGES_REJECTED,
            "seq False is not an integer in 0..2^63-1",
        ),
        (
            UpstreamMessage(MAX_SEQ + 1, "x"),
            MESSAGES_REJECTED,
            "seq 9223372036854775808 is not an integer in 0..2^63-1",
        ),
        (
            UpstreamMessage(20, "\ud800"),
            MESSAGES_REJECTED,
            "seq 20: data is not valid Unicode text",
        ),
        # MAX_SEQ itself is a valid seq: refused only as a jump far beyond the window.
        (
            UpstreamMessage(MAX_SEQ, "x"),
            SEQ_JUMPS,
            "seq jumped from 19 to 9223372036854775807, more than 1000000 ahead",
        ),
    ],
    ids=[
        "no-seq-in-a-sequenced-stream",
        "seq-True",
        "seq-False",
        "seq-2^63",
        "lone-surrogate",
        "seq-2^63-1",
    ],
)
async def test_a_refused_message_is_counted_and_its_reason_persisted_exactly(
    fleet: Fleet, extra: UpstreamMessage, counter: str, reason: str
) -> None:
    a, _ = await _bad_at_20(fleet, extra)

    failed = await _given_up(fleet, "bad")
    assert failed.reason == reason
    assert a.metrics.counters[counter] == 1
    assert fleet.sink.seqs("bad") == list(range(1, 20))
    assert (await _state(fleet, "bad")).checkpoint_seq == 19


async def test_seq_0_is_a_valid_seq_and_so_a_replay(fleet: Fleet) -> None:
    """0 is in the sink's range (0..2^63-1); every owner resumes past it, so it is a replay."""
    a, url = await _bad_at_20(fleet, UpstreamMessage(0, "zero"))
    await fleet.clock.advance(3)

    await _still_streamed_by(fleet, "bad", "a")
    assert a.metrics.counters[REPLAYS_DROPPED] == 1
    assert a.metrics.counters[MESSAGES_REJECTED] == 0
    seqs = fleet.sink.seqs("bad")
    assert seqs[-1] > 25
    fleet.assert_sink_complete("bad", url, upto=seqs[-1])


async def test_a_message_of_exactly_the_sinks_limit_is_stored_one_byte_more_is_refused(
    fleet: Fleet,
) -> None:
    fleet.sink = InMemoryMessageSink(max_message_bytes=64)  # before any worker: theirs too
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "bad")
    stream = fleet.upstream.streams[url]
    stream.inject = {20: [UpstreamMessage(20, "x" * 64)], 21: [UpstreamMessage(21, "y" * 65)]}
    stream.lost = {20, 21}  # the upstream's own 20 and 21 are not sent

    failed = await _given_up(fleet, "bad")
    assert failed.reason == "seq 21: 65 bytes, more than the sink stores (64)"
    assert fleet.sink.seqs("bad") == list(range(1, 21))
    assert fleet.sink.messages[("bad", 20)].data == "x" * 64
    assert a.metrics.counters[MESSAGES_REJECTED] == 1


async def test_a_jump_of_exactly_the_window_is_a_gap_one_more_is_a_fault(fleet: Fleet) -> None:
    a = fleet.add_worker("a", config=WorkerConfig(seq_jump_window=10))
    at_window = await fleet.start_streamed_by("a", "gap")
    fleet.upstream.streams[at_window].inject = {20: [UpstreamMessage(30, "ahead")]}
    fleet.upstream.streams[at_window].lost = set(range(20, 31))
    beyond = await fleet.start_streamed_by("a", "jump")
    fleet.upstream.streams[beyond].inject = {20: [UpstreamMessage(31, "too far")]}

    failed = await _given_up(fleet, "jump")
    await fleet.clock.advance(2)

    # Expected 20, got 30: ten seqs lost upstream, counted, and the stream goes on.
    await _still_streamed_by(fleet, "gap", "a")
    assert fleet.sink.messages[("gap", 30)].data == "ahead"
    assert fleet.sink.seqs("gap")[-1] > 31
    assert a.metrics.counters[MESSAGES_SKIPPED] == 10
    # Expected 20, got 31: eleven ahead of the next seq, beyond the window.
    assert failed.reason == "seq jumped from 19 to 31, more than 10 ahead"
    assert a.metrics.counters[SEQ_JUMPS] == 1
    assert fleet.sink.seqs("jump") == list(range(1, 20))


async def test_resumed_at_checkpoint_1_text_without_a_seq_is_the_upstreams_fault(
    fleet: Fleet,
) -> None:
    """The resumed rule holds from the lowest checkpoint a resume can have: 1."""
    fleet.add_worker("a")
    url = await fleet.start("c1")
    stream = fleet.upstream.streams[url]
    stream.lost = set(range(2, 40))  # only seq 1 arrives before the handover
    await fleet.clock.run_until(lambda: fleet.sink.seqs("c1") == [1], 5)
    await fleet.shutdown("a")
    assert (await _state(fleet, "c1")).checkpoint_seq == 1
    # The new owner's first message: text without a seq; the next (seq 40) has one.
    stream.inject = {2: [UpstreamMessage(None, "<html>")]}
    b = fleet.add_worker("b")

    failed = await _given_up(fleet, "c1")
    assert failed.reason == "a message without a seq in a sequenced stream (resumed)"
    assert b.metrics.counters[MESSAGES_REJECTED] == 1
    assert fleet.sink.seqs("c1") == [1]


async def test_a_fresh_stream_whose_first_message_has_no_seq_stores_it_at_once(
    fleet: Fleet,
) -> None:
    """Owned from checkpoint 0, a first message without a seq says the stream numbers nothing:
    stored as seq 1 at once, not held as a resumed one is. Each subscription here is dropped
    after one message, so a held message would be received again and stored twice."""
    fleet.add_worker("a")
    url = await fleet.start("c1")
    stream = fleet.upstream.streams[url]
    stream.numbered, stream.drop_after = False, 1
    await fleet.clock.advance(3)

    seqs = fleet.sink.seqs("c1")
    assert len(seqs) >= 3
    fleet.assert_sink_complete("c1", url, upto=seqs[-1])
    assert not [e for e in await fleet.store.history("c1") if isinstance(e, UpstreamFailed)]


async def test_a_resumed_stream_found_to_number_nothing_holds_nothing_after(fleet: Fleet) -> None:
    """Once a resumed stream's first two messages showed it numbers nothing, every later
    message is taken as it comes: none is held back for the next, so a numbered one later
    is just a message at its seq (here a replay), not a fault."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "plain")
    stream = fleet.upstream.streams[url]
    stream.numbered = False
    await fleet.clock.advance(1)
    await fleet.shutdown("a")
    checkpoint = (await _state(fleet, "plain")).checkpoint_seq
    assert checkpoint > 0
    assert a.task.done()
    # The new owner receives c+1, c+2 (the pair that decides), c+3, then seq c+3 again.
    stream.inject = {checkpoint + 4: [UpstreamMessage(checkpoint + 3, f"{url}#{checkpoint + 3}")]}
    b = fleet.add_worker("b")
    await fleet.clock.run_until(lambda: fleet.owner_of("plain") == "b", 5)
    await fleet.clock.advance(2)

    await _still_streamed_by(fleet, "plain", "b")
    assert b.metrics.counters[REPLAYS_DROPPED] == 1
    seqs = fleet.sink.seqs("plain")
    assert seqs[-1] > checkpoint + 5
    fleet.assert_sink_complete("plain", url, upto=seqs[-1])


async def test_an_upstream_that_kept_failing_is_given_up_with_that_reason_and_its_back_off(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    a = fleet.add_worker("a")
    # The worker's jitter pinned at the middle: the first back-off is exactly 3/4 of its base.
    a.worker.ctx.rng.random = lambda: 0.5  # type: ignore[method-assign]
    url = await fleet.start("c1")
    fleet.upstream.streams[url].fail_opens = fleet.config.reconnect_attempts

    failed = await _given_up(fleet, "c1", within_s=30)
    assert failed.reason == "upstream kept failing"
    assert failed.failures == 1
    assert failed.not_before_ms - failed.at_ms == int(
        0.75 * fleet.config.poison_backoff_base_s * 1000
    )
    [record] = _logged(caplog, "lease handed back (UPSTREAM_FAILED)")
    assert record.levelno == logging.INFO
    assert record.__dict__["connection_id"] == "c1"
    # The lease's own fencing token, the one the store recorded the failure under.
    assert record.__dict__["token"] == failed.token >= 1


class BreakableDns:
    """The fleet's one documentation address, until `broken`: then a plain bug."""

    def __init__(self) -> None:
        self.broken = False

    async def resolve(self, host: str) -> Sequence[str]:
        if self.broken:
            raise RuntimeError("resolver bug (test)")
        return ["192.0.2.10"]


async def test_a_session_that_fails_unexpectedly_logs_it_and_ends_as_an_error(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    dns = BreakableDns()
    # The workers' policy (the router keeps its own), private addresses allowed as the fleet's.
    fleet.url_policy = UrlPolicy(resolver=dns, allow_private=True)
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    [session] = list(a.worker.sessions)
    # Dropped, the session vets the URL again to reconnect: the resolver raises a bug.
    dns.broken = True
    fleet.upstream.streams[url].drop_after = 0
    await fleet.clock.run_until(lambda: session.end is not None, 5)

    assert session.end is SessionEnd.ERROR
    [record] = _logged(caplog, "session failed")
    assert record.levelno == logging.ERROR
    assert record.__dict__["connection_id"] == "c1"
    assert record.__dict__["token"] == session.token >= 1
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert (await _state(fleet, "c1")).owner == NO_OWNER  # released for another try
    assert not a.task.done()  # one connection's bug is not the worker's end
