"""Lease: a connection's hold read from the worker session, on virtual time with a real
SessionKeeper on the in-memory store (the mutation run of lease.py found these unasserted)."""

import logging

import pytest

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from application.config import WorkerConfig
from application.ports.metrics import LEASES_LOST
from tests.support.leases import trusted_lease, worker_context

TRUSTED_S = WorkerConfig().trusted_s


async def test_a_lease_is_untrusted_at_the_first_look_after_its_session_stops_being() -> None:
    clock = FakeClock()
    lease = await trusted_lease(worker_context(clock, InMemoryMetrics()), "c1")
    assert lease.valid()
    assert lease.remaining_s() == TRUSTED_S

    await clock.advance(TRUSTED_S)  # no renew: the keeper's heartbeat is not running

    assert not lease.valid()
    assert lease.remaining_s() == 0.0


async def test_a_lease_superseded_by_a_newer_token_is_lost_once_and_never_trusted_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.lease")
    clock, metrics = FakeClock(), InMemoryMetrics()
    lease = await trusted_lease(worker_context(clock, metrics), "c1", token=7)

    lease.lost("the sink holds a newer token")
    lease.lost("the sink holds a newer token")  # a second refused seq of the same batch

    assert lease.taken_over
    assert not lease.valid()
    assert lease.remaining_s() == 0.0
    assert metrics.counters[LEASES_LOST] == 1
    # Said once, with the connection and the token it was held with.
    [record] = caplog.records
    assert record.getMessage() == "lease lost (the sink holds a newer token)"
    assert (vars(record)["connection_id"], vars(record)["token"]) == ("c1", 7)
