"""The owner's periodic checkpoint record (ConnectionSession._watch_lease): the only
per-connection store write while streaming, so that a new owner after a crash has a recent
point to resume from even with a sink that cannot say what it stored. On virtual time, with
an interval short enough to watch several."""

import logging

import attrs
import pytest

from application.config import WorkerConfig
from tests.support.fleet import Fleet

INTERVAL_S = 10.0
CONFIG = attrs.evolve(WorkerConfig(), checkpoint_interval_s=INTERVAL_S)


@pytest.fixture
def fleet_config() -> WorkerConfig:
    return CONFIG


def checkpoint_writes(fleet: Fleet) -> int:
    return fleet.store.operations.get("Checkpoint", 0)


async def recorded(fleet: Fleet, connection_id: str) -> int:
    state = await fleet.store.get(connection_id)
    assert state is not None
    return state.checkpoint_seq


async def test_an_owner_records_what_is_stored_once_per_interval_and_only_when_it_moved(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    (session,) = a.worker.sessions
    assert await recorded(fleet, "c1") == 0

    # The first record comes after a jittered half to whole interval...
    await fleet.clock.advance(INTERVAL_S)
    assert checkpoint_writes(fleet) == 1
    first = await recorded(fleet, "c1")
    state = await fleet.store.get("c1")
    assert state is not None
    assert fleet.clock.now_ms() - INTERVAL_S * 1000 <= state.updated_at_ms <= fleet.clock.now_ms()
    assert 0 < first <= session.ingest.checkpoint
    assert set(range(1, first + 1)) <= set(fleet.sink.seqs("c1"))
    # ...then one per interval, each what was stored by then.
    await fleet.clock.advance(INTERVAL_S)
    assert checkpoint_writes(fleet) == 2
    second = await recorded(fleet, "c1")
    assert first < second <= session.ingest.checkpoint

    # A stream that sends nothing new costs no write.
    url = fleet.upstream.streams["ws://upstream.test/stream/c1"]
    url.lost.update(range(1, 100_000))
    await fleet.clock.advance(1.0)  # what was in flight is stored
    await fleet.clock.advance(3 * INTERVAL_S)
    assert checkpoint_writes(fleet) == 3  # the one that recorded the last messages
    assert await recorded(fleet, "c1") == session.ingest.checkpoint


async def test_a_record_the_store_does_not_take_is_logged_and_made_next_time(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.lease")
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    a.store.fail_next("Checkpoint")

    await fleet.clock.advance(INTERVAL_S)
    assert await recorded(fleet, "c1") == 0
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == (
        "checkpoint not recorded (next time): injected failure (Checkpoint)"
    )
    assert warning.__dict__["connection_id"] == "c1"

    await fleet.clock.advance(INTERVAL_S)
    assert await recorded(fleet, "c1") > 0
    assert fleet.owner_of("c1") == "a"  # a failed record costs nothing else


async def test_a_record_refused_because_the_store_names_another_owner_ends_the_session(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.lease")
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    (session,) = a.worker.sessions
    await fleet.clock.run_until(lambda: checkpoint_writes(fleet) == 1, INTERVAL_S)
    await fleet.clock.advance(INTERVAL_S - 0.01)
    # Just before the next record, the store names another owner: this worker's session
    # was ended behind its back and another took the connection over (its own heartbeat
    # would notice at its next renew; the record comes first).
    now = fleet.clock.now_ms()
    await fleet.store.end_session(session.lease.session_id, "reaped", now)
    await fleet.store.open_session("b#1", CONFIG.lease_ms, 10, now)
    assert await fleet.store.try_acquire("c1", "b#1", now) is not None

    await fleet.clock.advance(0.01)

    assert session.lease.taken_over
    (lost,) = [
        r for r in caplog.records if r.getMessage() == "lease lost (the store names another owner)"
    ]
    assert lost.__dict__["connection_id"] == "c1"
    assert a.metrics.counters["LeasesLost"] == 1  # counted where it is lost, like the sink's
    await fleet.clock.run_until(lambda: not a.worker.sessions, 5)
