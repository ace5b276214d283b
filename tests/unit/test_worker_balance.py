"""New workers take their share (issue 14): on virtual time, real Workers on the in-memory
fleet hand off their excess by the graceful path, lose and duplicate nothing, and then stay
still. The fixture's judge checks that no stream ever had two subscribers."""

import itertools

import attrs
import pytest

from application.config import BALANCE_BY, WorkerConfig
from application.ports.metrics import BALANCE_HANDOFFS
from application.worker.session_keeper import worker_of
from domain import LeaseAcquired, LeaseReleased, LeaseTakenOver
from tests.support.fleet import DEFAULT_CONFIG, Fleet
from tests.support.queues import HintRounds

OLD, NEW = ("w1", "w2", "w3"), ("w4", "w5", "w6")


def loads(fleet: Fleet) -> dict[str, int]:
    return {name: len(fleet.streamed_by(name)) for name in fleet.members}


def balanced(fleet: Fleet, total: int) -> bool:
    """Every worker within 10 % (or one connection) of the mean, everything streamed."""
    held = loads(fleet)
    mean = total / len(held)
    return sum(held.values()) == total and all(
        abs(h - mean) <= max(1.0, 0.1 * mean) for h in held.values()
    )


def handoffs(fleet: Fleet) -> int:
    return sum(int(m.metrics.counters.get(BALANCE_HANDOFFS, 0)) for m in fleet.members.values())


async def three_workers_holding(fleet: Fleet, count: int) -> dict[str, str]:
    for name in OLD:
        fleet.add_worker(name)
    urls = {f"c{i:02}": await fleet.start(f"c{i:02}") for i in range(count)}
    await fleet.clock.run_until(lambda: balanced(fleet, count), 60)
    return urls


async def assert_nothing_lost_or_duplicated(fleet: Fleet, urls: dict[str, str]) -> None:
    await fleet.close()  # every worker hands back with its final checkpoint
    assert fleet.sink.rewrites == 0, "a message was stored twice"
    for cid, url in urls.items():
        state = await fleet.store.get(cid)
        assert state is not None
        fleet.assert_sink_complete(cid, url, upto=state.checkpoint_seq)
        assert max(fleet.sink.seqs(cid)) == state.checkpoint_seq
        assert not any(isinstance(e, LeaseTakenOver) for e in await fleet.store.history(cid))


async def test_three_joining_workers_take_their_share_gracefully(fleet: Fleet) -> None:
    urls = await three_workers_holding(fleet, 30)
    before = handoffs(fleet)

    for name in NEW:
        fleet.add_worker(name)
    took = await fleet.clock.run_until(lambda: balanced(fleet, 30), 60)

    # Their join grace, then about one look at the fleet (a lease) to see the newcomers
    # past it, and a hint each.
    assert took <= DEFAULT_CONFIG.join_grace_s + 3 * DEFAULT_CONFIG.lease_ms / 1000, loads(fleet)
    moved = handoffs(fleet) - before
    assert 12 <= moved <= 18, moved  # 15 is the fewest that reach 5 each
    assert all(len(fleet.streamed_by(n)) >= 4 for n in NEW)
    # A handoff is never taken back by the worker that gave it (its hint is for the others).
    for cid in urls:
        history = await fleet.store.history(cid)
        for gave, took_it in itertools.pairwise(history):
            if isinstance(gave, LeaseReleased) and isinstance(took_it, LeaseAcquired):
                assert worker_of(took_it.owner) != worker_of(gave.owner), history

    # And then nothing moves, pass after pass.
    settled = handoffs(fleet)
    await fleet.clock.advance(60)
    assert handoffs(fleet) == settled
    assert balanced(fleet, 30)
    await assert_nothing_lost_or_duplicated(fleet, urls)


async def test_with_balance_off_nobody_hands_off() -> None:
    fleet = Fleet(attrs.evolve(DEFAULT_CONFIG, balance=False))
    try:
        urls = {}
        for name in OLD:
            fleet.add_worker(name)
        urls = {f"c{i:02}": await fleet.start(f"c{i:02}") for i in range(30)}
        await fleet.clock.run_until(lambda: sum(loads(fleet).values()) == 30, 60)
        for name in NEW:
            fleet.add_worker(name)
        await fleet.clock.advance(30)
        assert handoffs(fleet) == 0
        assert [len(fleet.streamed_by(n)) for n in NEW] == [0, 0, 0]
    finally:
        await fleet.close()
    assert fleet.sink.rewrites == 0
    assert all(p <= 1 for p in fleet.peak_subscribers().values())
    assert set(urls) == {f"c{i:02}" for i in range(30)}


@pytest.mark.parametrize(
    "fleet_config",
    [attrs.evolve(DEFAULT_CONFIG, balance_by=by) for by in BALANCE_BY],
    ids=BALANCE_BY,
)
async def test_a_worker_full_at_its_capacity_is_given_no_share_above_it(
    fleet: Fleet, fleet_config: WorkerConfig
) -> None:
    """WSFLEET_MAX_CONNECTIONS bounds a share: the small worker holds 4, the others share
    the rest. By load, 3 is as good: the others' 9 each are within one connection's cost of
    their level (about 8.7 connections' worth), and one more move would not bring a giver
    strictly closer to it (domain/balance.py `pick_hand_offs`)."""
    small = attrs.evolve(fleet_config, max_connections=4)
    urls = await three_workers_holding(fleet, 30)
    fleet.add_worker("small", config=small)
    most = 0

    def small_holds(at_least: int) -> bool:
        nonlocal most
        most = max(most, len(fleet.streamed_by("small")))
        return most >= at_least

    await fleet.clock.run_until(lambda: small_holds(3), small.join_grace_s + 30)
    for _ in range(30):
        await fleet.clock.advance(1)
        small_holds(0)
    assert most <= 4, "above its capacity"
    held = len(fleet.streamed_by("small")), sorted(len(fleet.streamed_by(n)) for n in OLD)
    if fleet_config.balance_by == "count":
        assert held == (4, [8, 9, 9])
    else:
        assert held in ((3, [9, 9, 9]), (4, [8, 9, 9]))
    await assert_nothing_lost_or_duplicated(fleet, urls)


async def test_a_burst_of_starts_is_taken_at_once_on_loads_a_heartbeat_stale(
    fleet: Fleet,
) -> None:
    """Every worker's view counts its own takes now and the others' as of their last renew:
    in a burst, each sees itself above a target the others seem far below, and judged on
    that, all three declined the hints until the next renews (the AWS fleet bench's pickup
    p99 went from 0.33 s to 4.4 s). Until its view has caught up with its own takes, a
    worker takes by capacity; balancing evens the burst out afterwards."""
    for name in OLD:
        fleet.add_worker(name)
    await fleet.clock.advance(DEFAULT_CONFIG.lease_ms / 1000)  # each has seen the others
    urls = {f"c{i:02}": "" for i in range(30)}
    for cid in urls:
        urls[cid] = await fleet.start(cid)
    took = await fleet.clock.run_until(lambda: sum(loads(fleet).values()) == 30, 60)
    # Before the next renew could report anybody's takes: no hint waited on stale loads.
    assert took < DEFAULT_CONFIG.heartbeat_interval_s, (took, loads(fleet))
    await fleet.clock.run_until(lambda: balanced(fleet, 30), 60)
    await fleet.clock.advance(10)  # every stream stores something before the judge
    await assert_nothing_lost_or_duplicated(fleet, urls)


async def test_no_balancing_handoff_while_the_sink_is_down(fleet: Fleet) -> None:
    """A handoff drains before it releases: started while the sink is down, it would leave
    its stream without a subscriber for as long as the outage (IngestWriter.keeping_up). The
    newcomers get their share once the sink is back."""
    urls = await three_workers_holding(fleet, 30)
    before = handoffs(fleet)
    for name in OLD:
        fleet.members[name].sink.outage = True
    for name in NEW:
        fleet.add_worker(name)
    # Three leases: balancing with a healthy sink is done by then (the first test). Every
    # stream keeps its subscriber throughout: no handoff was even begun.
    for _ in range(3 * DEFAULT_CONFIG.lease_ms // 500):
        await fleet.clock.advance(0.5)
        assert sum(len(fleet.streamed_by(n)) for n in OLD) == 30
        assert not any(fleet.members[n].worker.sessions.leaving for n in OLD)
    assert handoffs(fleet) == before
    assert [len(fleet.streamed_by(n)) for n in NEW] == [0, 0, 0]

    for name in OLD:
        fleet.members[name].sink.outage = False
    await fleet.clock.run_until(lambda: balanced(fleet, 30), 60)
    await assert_nothing_lost_or_duplicated(fleet, urls)


async def test_a_handoff_begun_as_the_sink_goes_down_keeps_its_streams_until_the_sink_is_back(
    fleet: Fleet,
) -> None:
    """The race the check above cannot close: the handoff is decided just after the sink
    went down, before any write failed (the soak: decided 0.26 s into a sink outage, it left 4
    streams without a subscriber for the whole 3 s outage). The handoff waits for the sink
    with its streams still open, and moves them once what they received is stored."""
    urls = await three_workers_holding(fleet, 30)
    giver = fleet.members[OLD[0]]
    giver.sink.outage = True
    await fleet.clock.advance(0.1)  # messages wait for the next flush; no write has failed yet
    assert giver.worker.sessions.writer.keeping_up()
    moving = giver.worker.sessions.hand_off(3)
    for name in NEW:
        fleet.add_worker(name)
    for _ in range(3 * DEFAULT_CONFIG.lease_ms // 500):
        await fleet.clock.advance(0.5)
        assert all(fleet.owner_of(cid) for cid in moving), "a moving stream lost its subscriber"
    assert set(moving) <= set(fleet.streamed_by(OLD[0]))  # the handoff waits for the sink

    giver.sink.outage = False
    await fleet.clock.run_until(lambda: not set(moving) & set(fleet.streamed_by(OLD[0])), 10)
    await fleet.clock.run_until(lambda: all(fleet.owner_of(cid) for cid in moving), 10)
    await fleet.clock.run_until(lambda: balanced(fleet, 30), 60)
    await assert_nothing_lost_or_duplicated(fleet, urls)


async def test_a_handoffs_hint_received_by_the_worker_that_gave_it_is_kept_for_another(
    fleet: Fleet,
) -> None:
    """GIVEN a worker whose own long poll receives the hint of a connection it has just handed
    off, before the session's task has finished (on SQS the poll is answered as the hint
    lands; the AWS chaos run: c09's hint was deleted as 'ours already' and c09 waited for a
    full scan, a minute by default) THEN the hint is given back, not deleted, and a worker
    that joins later takes the connection through it."""
    # The first round alone (its copy would be taken by the taker too), answered as on SQS.
    rounds = HintRounds(fleet.queue, copies=False, clock=fleet.clock, answer_s=0.05)
    giver = fleet.add_worker("giver", queue=rounds)
    urls = {cid: await fleet.start_streamed_by("giver", cid) for cid in ("c1", "c2")}
    await fleet.clock.advance(1)
    sent = fleet.queue.sent

    [moving] = giver.worker.sessions.hand_off(1)
    await fleet.clock.run_until(lambda: fleet.queue.sent > sent, 5)
    await fleet.clock.advance(0.5)  # the giver's poll has seen the hint, and given it back
    assert fleet.owner_of(moving) is None
    assert len(fleet.queue) == 1, "the handoff's hint was deleted by the worker that gave it"

    fleet.add_worker("taker")
    await fleet.clock.run_until(lambda: fleet.owner_of(moving) == "taker", 2)
    await assert_nothing_lost_or_duplicated(fleet, urls)


async def test_a_handoff_whose_first_hints_are_lost_moves_through_their_copies(
    fleet: Fleet,
) -> None:
    """GIVEN a worker whose hints' first round is lost (the AWS chaos run: a SIGKILLed
    worker's long poll, still open on the queue's server, took a handoff's hint and hid it
    3 s) WHEN it hands off to a newcomer THEN the connections move through the copies a
    second later, not at the newcomer's next full scan (a minute)."""
    giver = fleet.add_worker("giver", queue=HintRounds(fleet.queue, first=False))
    urls = {cid: await fleet.start_streamed_by("giver", cid) for cid in ("c1", "c2", "c3", "c4")}
    fleet.add_worker("taker")
    await fleet.clock.advance(5)  # the taker's first full scan is behind it
    moving = giver.worker.sessions.hand_off(2)

    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) == "taker" for c in moving), 10)
    await assert_nothing_lost_or_duplicated(fleet, urls)
