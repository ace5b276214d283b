"""Issue 13 on virtual time: whatever one upstream sends costs only that connection — never a
neighbour's message, nor the worker's health — and checkpoints only cover what was stored."""

import logging
from collections.abc import Sequence

import pytest

from adapters.memory.sink import InMemoryMessageSink
from application.ports import StoredMessage, UpstreamMessage
from application.ports.sink import MAX_SEQ
from application.worker.session_keeper import worker_of
from application.worker.worker import WorkerFailed
from domain import NO_OWNER, Connection, UpstreamFailed
from tests.support.fleet import Fleet


async def _state(fleet: Fleet, cid: str) -> Connection:
    state = await fleet.store.get(cid)
    assert state is not None
    return state


async def _backing_off(fleet: Fleet, cid: str) -> Connection:
    """The connection was given up on with the persisted back-off (no owner, not before)."""
    state = await _state(fleet, cid)
    assert state.owner == NO_OWNER, state
    assert state.failures >= 1, state
    assert state.not_before_ms > fleet.clock.now_ms(), state
    assert any(isinstance(e, UpstreamFailed) for e in await fleet.store.history(cid))
    return state


def _stored_without_gap(fleet: Fleet, cid: str, url: str, beyond: int) -> None:
    """Still being stored (beyond seq `beyond`) with every seq and the upstream's data."""
    seqs = fleet.sink.seqs(cid)
    assert seqs, f"{cid}: nothing stored"
    assert seqs[-1] > beyond, f"{cid} stalled at {seqs[-1]}"
    fleet.assert_sink_complete(cid, url, upto=seqs[-1])


async def _two_streams(fleet: Fleet, bad: dict[int, list[UpstreamMessage]]) -> tuple[str, str]:
    """ "good" and "bad" streamed by worker "a"; "bad" sends `bad[n]` just before seq n."""
    fleet.add_worker("a")
    good = await fleet.start_streamed_by("a", "good")
    url = await fleet.start("bad")
    fleet.upstream.streams[url].inject = bad
    await fleet.clock.run_until(lambda: fleet.owner_of("bad") == "a", 5)
    return good, url


@pytest.mark.parametrize(
    ("seq", "data"),
    [(MAX_SEQ + 1, "x"), (-1, "x"), (20, "\ud800"), (20, "x" * (64 * 1024 + 1))],
    ids=["seq-2^63", "seq-negative", "lone-surrogate", "larger-than-the-sink-stores"],
)
async def test_a_message_the_sink_cannot_store_costs_only_its_connection(
    seq: int, data: str
) -> None:
    fleet = Fleet()
    fleet.sink = InMemoryMessageSink(max_message_bytes=64 * 1024)
    try:
        good, _ = await _two_streams(fleet, {20: [UpstreamMessage(seq, data)]})
        await fleet.clock.advance(10)

        bad = await _backing_off(fleet, "bad")
        assert bad.checkpoint_seq == 19  # all before it is stored, nothing after it
        assert fleet.sink.seqs("bad") == list(range(1, 20))
        assert fleet.members["a"].metrics.counters["MessagesRejected"] == 1
        _stored_without_gap(fleet, "good", good, beyond=80)
        assert not fleet.members["a"].task.done()
    finally:
        await fleet.close()


async def test_the_back_off_is_kept_through_a_shutdown_and_the_next_worker_respects_it() -> None:
    fleet = Fleet()
    try:
        await _two_streams(fleet, {20: [UpstreamMessage(MAX_SEQ + 1, "x")]})
        counters = fleet.members["a"].metrics.counters
        await fleet.clock.run_until(lambda: counters["MessagesRejected"] == 1, 5)
        await fleet.shutdown("a")  # SIGTERM right after the bad message
        fleet.add_worker("b")
        await fleet.clock.advance(10)

        bad = await _backing_off(fleet, "bad")
        assert fleet.upstream.streams[bad.ws_url].opens == 1, "nobody took it back yet"
        assert fleet.owner_of("good") == "b"
    finally:
        await fleet.close()


async def test_a_seq_jump_beyond_the_window_is_a_fault_not_a_new_checkpoint(
    fleet: Fleet,
) -> None:
    await _two_streams(fleet, {20: [UpstreamMessage(10**15, "jump")]})
    await fleet.clock.advance(10)

    bad = await _backing_off(fleet, "bad")
    assert bad.checkpoint_seq == 19
    assert 10**15 not in fleet.sink.seqs("bad")
    assert fleet.members["a"].metrics.counters["SeqJumps"] == 1


async def test_a_jump_within_the_window_is_a_counted_gap(fleet: Fleet) -> None:
    _, url = await _two_streams(fleet, {20: [UpstreamMessage(25, "ahead")]})
    fleet.upstream.streams[url].lost = set(range(20, 26))
    await fleet.clock.advance(10)

    assert worker_of((await _state(fleet, "bad")).owner) == "a"
    assert fleet.sink.seqs("bad")[-1] > 30
    assert 25 in fleet.sink.seqs("bad")
    assert fleet.members["a"].metrics.counters["MessagesSkippedByUpstream"] == 5


async def test_a_bogus_jump_within_the_window_loses_nothing_the_stream_sends_after_it(
    fleet: Fleet,
) -> None:
    """seqs 1..19, one bogus 900020, then the real 20, 21, ...: the jump was held for the
    next message, which contradicts it. The connection backs off with its checkpoint before
    the jump, so the next owner asks for 20 on (stored as 20 with prev 19, the jump was taken
    as the new position and every real message after it dropped as a replay)."""
    await _two_streams(fleet, {20: [UpstreamMessage(900_020, "bogus")]})
    await fleet.clock.advance(10)

    bad = await _backing_off(fleet, "bad")
    assert bad.checkpoint_seq == 19
    assert fleet.sink.seqs("bad") == list(range(1, 20))
    assert fleet.members["a"].metrics.counters["SeqJumps"] == 1
    _stored_without_gap(fleet, "good", "ws://upstream.test/stream/good", beyond=30)


async def test_other_data_for_a_seq_this_session_received_gives_the_connection_up(
    fleet: Fleet,
) -> None:
    """Compared within the session as across owners: not dropped as a replay."""
    await _two_streams(fleet, {20: [UpstreamMessage(18, "OTHER")]})
    await fleet.clock.advance(10)

    bad = await _backing_off(fleet, "bad")
    assert bad.checkpoint_seq == 19
    assert fleet.sink.messages[("bad", 18)].data == "ws://upstream.test/stream/bad#18"
    assert fleet.members["a"].metrics.counters["SeqConflicts"] == 1
    _stored_without_gap(fleet, "good", "ws://upstream.test/stream/good", beyond=30)


async def test_replays_are_dropped_and_counted(fleet: Fleet) -> None:
    url = "ws://upstream.test/stream/bad"  # the simulated upstream sends f"{url}#{n}" as seq n
    replays = [UpstreamMessage(5, f"{url}#5"), UpstreamMessage(7, f"{url}#7")]
    assert (await _two_streams(fleet, {20: replays}))[1] == url
    await fleet.clock.advance(10)

    assert worker_of((await _state(fleet, "bad")).owner) == "a"
    _stored_without_gap(fleet, "bad", url, beyond=30)
    assert fleet.members["a"].metrics.counters["ReplaysDropped"] == 2


class PoisonedSink(InMemoryMessageSink):
    """Fails any batch holding a message whose data is "poison", the way a sink that meets
    what it cannot handle raises something nobody expected (sqlite3's OverflowError)."""

    def __init__(self) -> None:
        super().__init__()
        self.poisoned_batches = 0

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if any(m.data == "poison" for m in messages):
            self.poisoned_batches += 1
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        await super().write(messages)


async def test_a_batch_the_sink_fails_on_is_split_and_only_the_bad_connection_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fleet = Fleet()
    fleet.sink = PoisonedSink()
    try:
        fleet.add_worker("a")
        urls = [await fleet.start_streamed_by("a", f"c{i}") for i in range(1, 4)]
        fleet.upstream.streams[urls[1]].inject = {30: [UpstreamMessage(30, "poison")]}
        fleet.upstream.streams[urls[1]].lost = {30}
        await fleet.clock.advance(12)

        bad = await _backing_off(fleet, "c2")
        assert bad.checkpoint_seq == 29
        for cid, url in (("c1", urls[0]), ("c3", urls[2])):
            assert worker_of((await _state(fleet, cid)).owner) == "a"
            _stored_without_gap(fleet, cid, url, beyond=100)
        blamed = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert blamed
        assert all(getattr(r, "connection_id", None) == "c2" for r in blamed)
        assert not fleet.members["a"].task.done()
    finally:
        await fleet.close()


class BlinkingSink(InMemoryMessageSink):
    """A user's sink that names no error: while `down`, every write raises what its client
    library raises (ConnectionResetError), whatever the messages."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.failed_writes = 0

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if self.down:
            self.failed_writes += 1
            raise ConnectionResetError(104, "Connection reset by peer")
        await super().write(messages)


async def test_an_outage_of_a_sink_that_names_no_error_is_retried_and_fails_no_connection() -> None:
    """Two seconds of ConnectionResetError from a user's sink: taken for bad messages, every
    connection in the batch went to the persisted back-off (15 s to 15 min each)."""
    fleet = Fleet()
    sink = fleet.sink = BlinkingSink()
    try:
        fleet.add_worker("a")
        urls = {f"c{i}": await fleet.start_streamed_by("a", f"c{i}") for i in range(1, 4)}
        await fleet.clock.advance(1)
        sink.down = True
        await fleet.clock.advance(2)
        assert sink.failed_writes > 1
        sink.down = False
        await fleet.clock.advance(5)

        assert fleet.store.operations.get("ReportUpstreamFailure", 0) == 0
        for cid, url in urls.items():
            state = await _state(fleet, cid)
            assert worker_of(state.owner) == "a", state
            assert state.failures == 0, state
            _stored_without_gap(fleet, cid, url, beyond=60)
        assert fleet.members["a"].metrics.counters["SinkErrors"] >= 1
    finally:
        await fleet.close()


class BrokenMetrics:
    """A metrics adapter whose flush raises (the port forbids it: a bug)."""

    async def flush(self) -> None:
        raise RuntimeError("metrics adapter bug")


async def test_a_worker_whose_loop_ends_releases_everything_and_exits(fleet: Fleet) -> None:
    member = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(3)

    member.metrics.flush = BrokenMetrics().flush  # type: ignore[method-assign]
    await fleet.clock.run_until(member.task.done, 2 * fleet.config.metrics_interval_s)

    assert isinstance(member.task.exception(), WorkerFailed)
    state = await _state(fleet, "c1")
    assert state.owner == NO_OWNER, "released, not left to renew or to expire"
    fleet.assert_sink_complete("c1", url, upto=state.checkpoint_seq)
    assert state.checkpoint_seq > 20


async def test_a_bad_message_found_by_the_writer_during_a_shutdown_still_backs_off() -> None:
    """The old path: SIGTERM released the bad connection with no back-off, the next worker
    took it at once, and its writer died too (issue 13)."""
    fleet = Fleet()
    fleet.sink = PoisonedSink()
    try:
        a = fleet.add_worker("a")
        url = await fleet.start_streamed_by("a", "c1")
        fleet.upstream.streams[url].inject = {30: [UpstreamMessage(30, "poison")]}
        fleet.upstream.streams[url].lost = {30}
        queued = [lane._queue for lane in a.worker.ingest.lanes]
        await fleet.clock.run_until(
            lambda: any(m.data == "poison" for queue in queued for *_, m in queue), 5
        )

        await fleet.shutdown("a")  # drains the poison: found while handing over
        fleet.add_worker("b")
        await fleet.clock.advance(10)

        state = await _backing_off(fleet, "c1")
        assert state.checkpoint_seq == 29
        log = fleet.upstream.streams[url].log
        given_up_at = log[1][0]
        reopened = [t for t, what, _ in log[2:] if what == "open"]
        assert all(t >= given_up_at + fleet.config.poison_backoff_base_s / 2 for t in reopened)
    finally:
        await fleet.close()


async def _handed_over_at(fleet: Fleet, cid: str) -> tuple[str, int]:
    """`cid` streamed by worker "a", then handed over by its shutdown: (url, checkpoint)."""
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", cid)
    await fleet.clock.advance(1)
    await fleet.shutdown("a")
    return url, (await _state(fleet, cid)).checkpoint_seq


async def test_text_without_a_seq_first_after_a_resume_is_the_upstreams_fault(
    fleet: Fleet,
) -> None:
    """GIVEN a stream that numbers its messages, handed over at checkpoint c, WHEN the first
    message the new owner receives is text without a seq (the hostile tier: a handoff landed
    just before a 'non-json' frame, and the text was stored as seq c + 1) THEN it is the
    upstream's fault: back-off, and nothing stored past c."""
    url, checkpoint = await _handed_over_at(fleet, "bad")
    assert checkpoint > 0
    fleet.upstream.streams[url].inject = {checkpoint + 1: [UpstreamMessage(None, "<html>")]}
    fleet.add_worker("b")
    await fleet.clock.advance(5)

    bad = await _backing_off(fleet, "bad")
    assert bad.checkpoint_seq == checkpoint
    assert fleet.sink.seqs("bad") == list(range(1, checkpoint + 1))


async def test_a_stream_that_numbers_nothing_is_resumed_as_data_in_order(fleet: Fleet) -> None:
    """The other reading of the same first message: when the next one has no seq either, the
    stream numbers nothing, and both are data, stored in the order received."""
    url = await fleet.start("plain")
    fleet.upstream.streams[url].numbered = False
    _, checkpoint = await _handed_over_at(fleet, "plain")
    assert checkpoint > 0
    fleet.add_worker("b")
    await fleet.clock.run_until(lambda: fleet.owner_of("plain") == "b", 5)
    await fleet.clock.advance(2)

    seqs = fleet.sink.seqs("plain")
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) > checkpoint + 5
    # The upstream's own order (the fake writes its count into the data).
    resumed = [int(fleet.sink.messages[("plain", s)].data.rsplit("#", 1)[1]) for s in seqs]
    assert resumed == sorted(resumed)
    assert (await _state(fleet, "plain")).failures == 0
