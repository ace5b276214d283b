"""The worker's fleet-facing loops: queue polling, orphan reconciliation, desired-state checks
and metrics. Each loop logs and counts a failed iteration and carries on; none blocks."""

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence

from application.aio import first_completed, gather_all, wait_or_timeout
from application.config import WorkerConfig
from application.errors import ApplicationError
from application.ports import HintOrigin
from application.ports.metrics import (
    ACTIVE_CONNECTIONS,
    HOLDING_WITHOUT_STORING_S,
    LOOP_LAG_MS,
    MALFORMED_HINTS,
    MESSAGES_RECEIVED,
    ORPHANS_FOUND,
    STORE_ERRORS,
)
from application.worker.context import WorkerContext
from application.worker.ingest import IngestWriter
from application.worker.session import SessionEnd
from application.worker.session_keeper import SessionKeeper
from application.worker.sessions import Sessions
from domain import (
    NO_OWNER,
    Connection,
    DesiredState,
    DomainError,
    SessionStatus,
    WorkerSession,
)
from domain.balance import tended_by

log = logging.getLogger(__name__)

# How often the loop-lag probe asks for a wake-up: often enough to catch a stall of a second,
# rarely enough to cost nothing (two timers a second per worker).
LOOP_LAG_PROBE_S = 0.5

# A worker at its share declines hints and looks at the fleet again after this part of a
# heartbeat. The view that declined them is up to a heartbeat old, and in a rolling deploy it
# still counts the leaving worker's connections as held until its session ends, a few tenths
# of a second after the hints went out: waiting a whole heartbeat for the next look kept the
# last of them waiting about 1.3 s (the AWS fleet bench's handoff p99 at 1.7 s, against 0.8 s
# before workers held back for their share). It costs the look (one read) a few times a second
# only while hints are being declined.
DECLINED_RECHECK_BEATS = 0.25

# Each interval between full scans is drawn from the reconcile interval times 1 +/- this. A
# worker's next full scan is an interval after its last, so the scans of a fleet started (or
# restarted after an outage) together stayed in the same second for good: at 1,000 workers in
# the simulation, 117,253 RCU in the peak second, three times a table's default quota (bench/
# RESULTS.md section 31). Drawn at +/- 10 %, they spread over a fifth of the interval within
# a scan or two, and the mean interval, the cost, stays as set.
RECONCILE_SPREAD = 0.1


class Heartbeats:
    """When each loop last completed an iteration (monotonic seconds), for the health check."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.store_reached: float | None = None


async def poll_queue(
    ctx: WorkerContext, sessions: Sessions, beats: Heartbeats, draining: asyncio.Event
) -> None:
    """Hints from the queue: take each connection (lease first), delete the hint either way.

    One receiver long-polls; while it finds full batches (a backlog: a deploy wave's handoff
    hints, a burst of STARTs), up to `poll_concurrency - 1` helpers receive beside it, each
    while this worker's room would fill its batch too, without waiting (`_receive_hints`). A
    queue hands at most `poll_batch` (SQS: 10) hints per receive, and one receiver (a round
    trip, then the batch's acquisitions, per 10) took a deploy wave's hints at about 100 a
    second per newcomer: in the simulation's deploy at 100 workers a hint waited 0.65 s for a
    receive at the median, 1.3 s at p99 (bench/RESULTS.md section 34). Helpers only in a
    backlog: a fleet at rest keeps one poll per worker.

    Shutdown sets `draining` instead of cancelling a long poll in flight: a cancelled request
    can still be answered on the server (SQS hands a message to the abandoned poll), which
    would hide a handoff hint for a whole visibility timeout. The last receive is let finish
    — it returns at once if it catches a hint — and whatever it caught is given back."""
    backlog = asyncio.Event()
    await gather_all(
        *(
            _receive_hints(ctx, sessions, beats, draining, backlog, index)
            for index in range(ctx.config.poll_concurrency)
        )
    )


async def _receive_hints(
    ctx: WorkerContext,
    sessions: Sessions,
    beats: Heartbeats,
    draining: asyncio.Event,
    backlog: asyncio.Event,
    index: int,
) -> None:
    """One receiver of `poll_queue`. The first (`index` 0) long-polls always and says whether
    the queue has a backlog (it received a full batch). A helper receives only then, only
    while this worker's room exceeds what the receivers before it ask for (`index` batches),
    and with no wait, so that it never holds a long poll open (at shutdown, each would catch
    the worker's own handoff hints and give them back)."""
    cfg = ctx.config
    balance = sessions.balance
    wait_s = cfg.poll_wait_s if index == 0 else 0.0
    while not draining.is_set():
        beats.last["poll"] = ctx.clock.monotonic()
        if index and not backlog.is_set():
            await first_completed(backlog.wait(), draining.wait())
            continue
        if index and sessions.free <= index * cfg.poll_batch:
            await wait_or_timeout(draining, ctx.clock, _declined_pause(cfg, sessions))
            continue
        # At its share, a worker with room still receives while a leaver's connections are
        # open to all (Balance.leavers_open): nobody short took them, so they wait for it.
        leavers_open = balance.leavers_open(ctx.clock.now_ms())
        if sessions.free <= 0 and (sessions.full or not leavers_open):
            # Full: a while. At its share while another worker is below its own: a part of a
            # heartbeat, then a fresh look at the fleet (one read): the view the sessions watch
            # keeps is up to a lease old, and a death or an exit since changes the shares.
            await wait_or_timeout(draining, ctx.clock, _declined_pause(cfg, sessions))
            if not sessions.full and not draining.is_set():
                await _refresh_view(ctx, sessions)
            continue
        try:
            room = max(sessions.free - index * cfg.poll_batch, 1 if leavers_open else 0)
            deliveries = await ctx.queue.receive(min(cfg.poll_batch, room), wait_s)
            if draining.is_set():
                await ctx.queue.release([d.receipt for d in deliveries])
                return
            if len(deliveries) >= cfg.poll_batch and index == 0:
                backlog.set()
            elif len(deliveries) < cfg.poll_batch:
                backlog.clear()
            wanted: dict[str, list[str]] = {}  # connection id -> receipts of its hints
            first_round: set[str] = set()  # named by some hint that is not a delayed copy
            origins: dict[str, HintOrigin] = {}  # who released it, as its hints say
            for delivery in deliveries:
                if delivery.connection_id is None:
                    ctx.metrics.count(MALFORMED_HINTS)
                    log.warning("dropping malformed hint: %s", delivery.problem)
                    continue
                wanted.setdefault(delivery.connection_id, []).append(delivery.receipt)
                if not delivery.copy:
                    first_round.add(delivery.connection_id)
                if delivery.origin is not None:
                    origins[delivery.connection_id] = delivery.origin
            # Duplicates and redeliveries of what is held already are just deleted.
            candidates = [cid for cid in wanted if not sessions.holds(cid)]
            taken = await _taken_already(ctx, [c for c in candidates if c not in first_round])
            to_take = [(cid, False) for cid in candidates if cid not in taken]
            sessions.balance.note_leaving(origins.values())
            if to_take and sessions.balance.behind(origins.values()):
                # A releaser handing off to balance saw the fleet out of balance; a view that
                # sees it balanced is older than that (a join it missed, read a lease ago):
                # taking on it, this worker would take what the newcomers are short of.
                await _refresh_view(ctx, sessions)
            # Filled up while polling (reconciliation took some): another worker may have
            # room, so those hints are given back; deleting them would leave the connections
            # to reconciliation.
            no_room = await _take_hinted(ctx, sessions, [cid for cid, _ in to_take], origins)
            if no_room and not sessions.full and sessions.balance.enabled:
                # Declined for this worker's share on a view up to a lease old (see above): look
                # again once (a pause follows a batch taken in none).
                await _refresh_view(ctx, sessions)
                no_room = await _take_hinted(ctx, sessions, list(no_room), origins)
            if to_take:
                beats.store_reached = ctx.clock.monotonic()
            give_back = [r for cid in no_room for r in wanted[cid]]
            done = [d.receipt for d in deliveries if d.connection_id not in no_room]
            if give_back:
                await ctx.queue.release(give_back)
            if done:
                await ctx.queue.delete(done)
            if give_back and len(no_room) == len(to_take):
                # Took none (no room, or only what it just handed off to balance): leave the
                # hints to the others for a while rather than receive them again at once.
                await wait_or_timeout(draining, ctx.clock, _declined_pause(cfg, sessions))
        except ApplicationError as exc:
            ctx.metrics.count(STORE_ERRORS)
            log.warning("queue polling failed: %s", exc)
            await wait_or_timeout(draining, ctx.clock, cfg.capacity_pause_s)


async def _take_hinted(
    ctx: WorkerContext,
    sessions: Sessions,
    connection_ids: Sequence[str],
    origins: Mapping[str, HintOrigin],
) -> set[str]:
    """Take what hints name; returns the ids declined for want of room. A reported death's
    hints name the dead session (application/deaths.py): while it is within the placement
    grace its connections are placed by share, as the orphan scan places them, and past it
    they are open to all by capacity. A leaving worker's are taken by this worker's share,
    with the leaver out of the split, and past the grace by capacity (Balance.open_to_all);
    the rest by this worker's share."""
    balance, now_ms = sessions.balance, ctx.clock.now_ms()

    def by_capacity(cid: str) -> bool:
        """Open to all (Balance.open_to_all), or a balancing hint meant for this worker."""
        origin = origins.get(cid)
        return balance.open_to_all(origin, now_ms) or balance.meant_for_me(origin)

    # A heavy balancing hint meant for another worker (by load, HintOrigin.to) is left to it
    # for a grace: given back untried, as for want of room.
    left = {c for c in connection_ids if balance.left_for_another(c, origins.get(c), now_ms)}
    connection_ids = [c for c in connection_ids if c not in left]

    # A reported death's: still owned by the dead session. Not a leaver's that has ended
    # meanwhile: it released them (Balance.open_to_all).
    placed = [
        c
        for c in connection_ids
        if c in origins
        and not origins[c].leaving
        and balance.dead(origins[c].session_id)
        and balance.placing(origins[c].session_id, now_ms)
    ]
    no_room: list[str] = list(left)
    with sessions.placing(placed, found=False):
        candidates = [(c, by_capacity(c)) for c in connection_ids]
        no_room += await sessions.take_each(candidates, origins)
    return set(no_room)


def _declined_pause(cfg: WorkerConfig, sessions: Sessions) -> float:
    """How long the poll loop waits before it receives again, having declined: at capacity, a
    while; at its share, until a look at the fleet may have changed its answer; without a
    trusted session, as long (a new one is a round trip away: a worker back from a freeze
    opened one 33 ms after fencing, and waited out the capacity pause before taking the
    handoffs meant for it)."""
    if sessions.at_capacity:
        return cfg.capacity_pause_s
    return min(DECLINED_RECHECK_BEATS * cfg.heartbeat_interval_s, cfg.capacity_pause_s)


async def _taken_already(ctx: WorkerContext, copies: Sequence[str]) -> set[str]:
    """Of the connections named only by delayed copies (application/hints.py), those that no
    longer want an owner: their first round was taken, or they were stopped. One read each,
    side by side, instead of an acquire the store would refuse (a failed transaction costs
    write units, and a store's throughput during a handoff wave)."""
    if not copies:
        return set()
    found = await gather_all(*(ctx.store.get(cid) for cid in copies))
    return {
        cid
        for cid, conn in zip(copies, found, strict=True)
        if conn is None or conn.owner != NO_OWNER or conn.desired_state is not DesiredState.STARTED
    }


async def _refresh_view(ctx: WorkerContext, sessions: Sessions) -> None:
    """A fresh view of the fleet's loads for the balance; a store failure only keeps the old
    one (the sessions watch will read it again)."""
    if not sessions.balance.enabled:
        return
    try:
        sessions.balance.observe(await ctx.store.list_sessions(), ctx.clock.now_ms())
    except ApplicationError as exc:
        ctx.metrics.count(STORE_ERRORS)
        log.warning("reading the fleet's loads failed: %s", exc)


async def reconcile(
    ctx: WorkerContext, sessions: Sessions, beats: Heartbeats, *, keeper: SessionKeeper
) -> None:
    """Take every orphan capacity allows, at two cadences (what it reads is a cost per
    worker, so it must not run a full scan at every session expiry).

    - A **watch** of the worker sessions (one small read: a Scan of a few items) wakes when
      the next other session can expire, and at least once a lease: a session granted after
      the last look expires a lease after it opened at the earliest, so it is never slept past.
      A session found newly dead triggers a full scan at once, so a
      crashed worker's connections move about one lease after its last renew.
    - A **full scan** (every orphan: the unowned ones past their back-off, and those of dead
      sessions, all pages) runs then, about every reconcile interval (RECONCILE_SPREAD), and
      when a back-off ends (the store says when). Unowned orphans are mostly taken through
      their hints; the scan is the safety net for a hint that was lost. After it, an expired
      session's expiry is recorded in its history, and dead sessions that own nothing any
      more are deleted."""
    cfg = ctx.config
    rng: random.Random = ctx.rng
    # The scans' spread draws from its own generator, seeded by the worker's id (distinct per
    # worker): the loop's other draws stay the sequence they were.
    spread_rng = random.Random(ctx.worker_id)
    delay = rng.random() * cfg.reconcile_jitter_s
    full_due = ctx.clock.monotonic()  # the first look is a full scan
    backoff_ends_at = NEVER  # epoch ms: the next back-off end the store told of
    seen_dead: set[str] = set()
    # The last scan left orphans for want of room (full, or no trusted session yet: right
    # after an outage every worker scans while still reopening its session). Scanning again
    # as soon as there is room, not an interval later, is what lets a fleet-wide outage end.
    starved = False
    while True:
        await ctx.clock.sleep(delay)
        beats.last["reconcile"] = ctx.clock.monotonic()
        try:
            now = ctx.clock.now_ms()
            listed = await ctx.store.list_sessions()
            beats.store_reached = ctx.clock.monotonic()
            sessions.balance.observe(listed, now)
            dead = {s.session_id for s in listed if not s.is_live(now)}
            due = ctx.clock.monotonic() >= full_due or now >= backoff_ends_at
            if dead - seen_dead or due or (starved and sessions.free > 0):
                starved, withheld = await _take_orphans(ctx, sessions, now)
                tended = _tended(listed, now, keeper.session_id)
                await _note_expiries(ctx, tended, now, keeper.session_id)
                await _forget_dead_sessions(ctx, tended, now)
                # From the scan's own `now`: a back-off that ended while the orphans were
                # being taken was not in the scan, and asking from later would skip it too.
                next_at = await ctx.store.next_available_at(now)
                backoff_ends_at = NEVER if next_at is None else next_at + 1
                # Orphans (a dead worker's have no hint) left to workers short of their share
                # by a view that may be stale, or left to their hints: look again a heartbeat
                # later, not a minute.
                spread = 1 + RECONCILE_SPREAD * (2 * spread_rng.random() - 1)
                again_s = (
                    cfg.heartbeat_interval_s if withheld else cfg.reconcile_interval_s * spread
                )
                full_due = ctx.clock.monotonic() + again_s
            seen_dead = dead
            _rebalance(ctx, sessions, keeper)
            wake_at_ms = min(now + cfg.lease_ms, backoff_ends_at)
            expiries = [
                s.expires_at_ms + 1
                for s in listed
                if s.session_id != keeper.session_id and s.is_live(now)
            ]
            wake_at_ms = min([wake_at_ms, *expiries])
            delay = min((wake_at_ms - ctx.clock.now_ms()) / 1000, full_due - ctx.clock.monotonic())
            if sessions.balance.moving():
                delay = min(delay, cfg.heartbeat_interval_s)
            delay = max(delay, 0.01) + rng.random() * cfg.reconcile_jitter_s
        except ApplicationError as exc:
            ctx.metrics.count(STORE_ERRORS)
            log.warning("reconciliation failed: %s", exc)
            delay = cfg.heartbeat_interval_s


NEVER = 2**63


def _rebalance(ctx: WorkerContext, sessions: Sessions, keeper: SessionKeeper) -> None:
    """Above its share (domain/balance.py): hand the excess off, a bounded number per pass,
    once the last handoffs are released and counted by their takers, and only while the sink
    keeps up (a handoff drains first: see IngestWriter.keeping_up)."""
    if sessions.leaving or not keeper.trusted:
        return
    if not sessions.writer.keeping_up():
        return
    count = sessions.balance.hand_off_now()
    moved = sessions.hand_off(count) if count else []
    # By load, what moved in lately is held (Sessions.hand_off): a pass may move none.
    if moved:
        log.info(
            "above this worker's share: handing off %d connections",
            len(moved),
            extra={"worker_id": ctx.worker_id},
        )


# A dead session's item is deleted only this long after its death: DynamoDB finds a dead
# session's connections through an index that lags its writes (about a second), and a
# connection whose owner's item is gone is seen by nobody there.
FORGET_GRACE_MS = 60_000


def _tended(listed: Sequence[WorkerSession], now_ms: int, me: str) -> list[WorkerSession]:
    """The dead sessions of the listing this worker sees to (domain/balance.py `tended_by`):
    one survivor each, so an AZ loss's leftovers cost each survivor its few, not every one.
    Should two views disagree, two see to one (every step below is idempotent) or none does
    until the next scan."""
    # Not a leaving one (WorkerSession.leaving): it takes nothing more.
    live = [s.session_id for s in listed if s.is_live(now_ms) and not s.leaving]
    dead = [s for s in listed if not s.is_live(now_ms)]
    tenders = tended_by((s.session_id for s in dead), live)
    return [s for s in dead if tenders.get(s.session_id) == me]


async def _note_expiries(
    ctx: WorkerContext, tended: Sequence[WorkerSession], now_ms: int, finder: str
) -> None:
    """Record in each expired session's history that it expired and that this worker found it
    (an ended one says so itself). After the takeovers, not before: the record writes the
    session's item, which every takeover of its connections checks, and a takeover is what
    must not wait. Only the sessions this worker tends (should two record, or the one die
    first, the store keeps the first record, and the next survivor's scan asks again). Side
    by side: an AZ's worth of deaths costs the loop one round trip, not one per death."""
    expired = [
        s for s in tended if s.status(now_ms) is SessionStatus.EXPIRED and not s.expiry_noted
    ]
    noted = await gather_all(
        *(ctx.store.note_expiry(s.session_id, finder, now_ms) for s in expired)
    )
    for session, first in zip(expired, noted, strict=True):
        if first:
            log.info(
                "worker session %s found expired (its last renew ran out at %d)",
                session.session_id,
                session.expires_at_ms,
                extra={"worker_id": ctx.worker_id},
            )


async def _forget_dead_sessions(
    ctx: WorkerContext, tended: Sequence[WorkerSession], now_ms: int
) -> None:
    """A dead session's item is kept while a connection names it (that is how its
    connections are found); after that (and a grace) it is deleted, by the survivor that
    tends it (`_tended`).

    A connection STOPPED while its owner was dying is released on the dead owner's behalf
    (with its own token and checkpoint): nobody may acquire a STOPPED connection, so nothing
    else would ever clear it, and it would keep its owner's session item forever. Safe: the
    owner is dead for good, and a STOPPED connection is streamed by nobody.

    The dead sessions it tends are seen to side by side: one after another, a store round
    trip each, the 33 of an AZ loss at 100 workers held up the survivor's next scan (1.65 s in
    the simulation, whose clock moves in steps of 0.05 s), and the orphans its first scan had
    left waited for it."""
    await gather_all(*(_forget_dead(ctx, session, now_ms) for session in tended))


async def _forget_dead(ctx: WorkerContext, session: WorkerSession, now_ms: int) -> None:
    """One dead session: release its STOPPED connections, and delete it past the grace."""
    for cid in await ctx.store.stop_requested(session.session_id):
        conn = await ctx.store.get(cid)
        if conn is None or conn.owner != session.session_id or not conn.stop_pending:
            continue
        try:
            await ctx.store.release(
                cid,
                session.session_id,
                conn.token,
                conn.checkpoint_seq,
                now_ms,
                reason="stopped while its owner died",
            )
            log.info(
                "released a STOPPED connection of dead session %s",
                session.session_id,
                extra=ctx.log_extra(cid, conn.token),
            )
        except DomainError as exc:  # its owner released it meanwhile
            log.info("STOPPED connection not released for its dead owner: %s", exc)
    died_at = session.updated_at_ms if session.ended_reason else session.expires_at_ms
    if now_ms - died_at > FORGET_GRACE_MS:
        await ctx.store.forget_session(session.session_id, now_ms)


async def _take_orphans(ctx: WorkerContext, sessions: Sessions, now_ms: int) -> tuple[bool, bool]:
    """Take what room allows. Returns (starved, withheld): some orphan was left for want of
    room (full, or no trusted session yet); some was left that this worker had the capacity
    for (its share said no: the balance left it to workers short of theirs; or it was freed so
    recently that its hint is still on its way). A dead worker's are taken up to this worker's
    part of them, then, past the placement grace, up to capacity (Sessions._room); so is an
    unowned one that has wanted an owner for the grace (Balance.waited_out).

    The whole scan is read before anything is taken: this worker's part is its share of all
    the dead workers' connections, so it must know how many there are. Placed page by page,
    each page's part was counted as if the page were all there was (at 100 workers and 100 a
    page, about a fifth of the part per scan), the placement grace ended with most of them
    unplaced, and every survivor then raced every other for all of them. It is taken from a
    page's worth at a time, and a page mostly lost to other workers ends the round: what is
    left of a scan that old is mostly taken, and each try costs the acquisition's reads."""
    orphans: list[Connection] = []
    async for page in ctx.store.iter_orphans(now_ms, ctx.config.reconcile_page_size):
        orphans.extend(page)
    ctx.metrics.gauge(ORPHANS_FOUND, len(orphans))  # how many wait for room, when full
    if sessions.full:
        return bool(orphans), False
    hinted = {o.connection_id for o in orphans if _left_to_its_hint(ctx, o, now_ms)}
    # In an order the other workers of this view do not share, so that they mostly try
    # different orphans first (shuffled without a view).
    by_id = {o.connection_id: o for o in orphans}
    order = sessions.balance.take_order(list(by_id))
    ordered = ctx.rng.sample(orphans, len(orphans)) if order is None else [by_id[c] for c in order]
    placed = [
        o.connection_id
        for o in orphans
        if o.owner != NO_OWNER and sessions.balance.placing(o.owner, now_ms)
    ]
    # By capacity (as a dead owner's past the grace): an unowned one that has waited the
    # placement grace; the workers short of their share did not take it.
    candidates = [
        (
            o.connection_id,
            o.owner != NO_OWNER or sessions.balance.waited_out(o.updated_at_ms, now_ms),
        )
        for o in ordered
        if o.connection_id not in sessions and o.connection_id not in hinted
    ]
    no_room: list[str] = []
    stale = False
    step = ctx.config.reconcile_page_size
    with sessions.placing(placed):
        for i in range(0, len(candidates), step):
            chunk, lost = candidates[i : i + step], sessions.lost
            declined = await sessions.take_each(chunk)
            no_room += declined
            if sessions.lost - lost > (len(chunk) - len(declined)) // 2:
                # What it tried was mostly taken by others since the scan: the rest is read
                # again a heartbeat later rather than tried one by one (three reads each to be
                # refused). Judged against the tries, not the page: a survivor short of its
                # part by a few declines most of each page, and lost the few it tried page
                # after page (bench/RESULTS.md section 34).
                stale = True
                break
    withheld = stale or bool(hinted) or (bool(no_room) and not sessions.full)
    return bool(no_room), withheld


def _left_to_its_hint(ctx: WorkerContext, orphan: Connection, now_ms: int) -> bool:
    """Released or STARTed less than a heartbeat ago: its hint is on its way to one worker,
    and a scan taking it too would only race that worker (the AWS fleet bench: a newcomer's
    first scan ran while the worker it replaced released, and 6 of one taker's 13
    acquisitions lost to the scan's: failed transactions on a store busy with the handoff).
    A dead session's connections have no hint and are taken at once; a lost hint costs a
    heartbeat more: the scan looks again then."""
    return (
        orphan.owner == NO_OWNER
        and now_ms - orphan.updated_at_ms < ctx.config.heartbeat_interval_s * 1000
    )


async def watch_stops(
    ctx: WorkerContext, sessions: Sessions, beats: Heartbeats, *, keeper: SessionKeeper
) -> None:
    """One indexed read per interval, whatever this worker holds: the STOPPED connections its
    session still owns (the store indexes exactly those). Each is ended and released."""
    while True:
        await ctx.clock.sleep(ctx.config.desired_state_interval_s)
        beats.last["stops"] = ctx.clock.monotonic()
        if not len(sessions) or not keeper.session_id:
            continue
        try:
            stopped = await ctx.store.stop_requested(keeper.session_id)
            beats.store_reached = ctx.clock.monotonic()
        except ApplicationError as exc:
            ctx.metrics.count(STORE_ERRORS)
            log.warning("STOP check failed: %s", exc)
            continue
        for cid in stopped:
            if cid in sessions:
                log.info("STOP seen, closing", extra=ctx.log_extra(cid))
                sessions.stop(cid, SessionEnd.STOPPED)


async def publish_metrics(
    ctx: WorkerContext, sessions: Sessions, beats: Heartbeats, *, writer: IngestWriter
) -> None:
    stored, quiet_since = writer.stored, ctx.clock.monotonic()
    # Read where it is published (each flush, or each scrape): current at every scrape, and
    # still no metrics call per message.
    ctx.metrics.track(MESSAGES_RECEIVED, lambda: writer.received)
    while True:
        now = ctx.clock.monotonic()
        if writer.stored != stored or not len(sessions):
            stored, quiet_since = writer.stored, now
        ctx.metrics.gauge(ACTIVE_CONNECTIONS, len(sessions))
        ctx.metrics.gauge(HOLDING_WITHOUT_STORING_S, now - quiet_since)
        await ctx.metrics.flush()
        beats.last["metrics"] = ctx.clock.monotonic()
        await ctx.clock.sleep(ctx.config.metrics_interval_s)


async def measure_loop_lag(ctx: WorkerContext, sessions: Sessions, beats: Heartbeats) -> None:
    """How late the loop wakes a timer: anything that blocks it (a slow callback, a GC pause,
    a starved CPU) delays every heartbeat and every message alike."""
    while True:
        asked = ctx.clock.monotonic()
        await ctx.clock.sleep(LOOP_LAG_PROBE_S)
        late_s = ctx.clock.monotonic() - asked - LOOP_LAG_PROBE_S
        ctx.metrics.timing(LOOP_LAG_MS, max(0.0, late_s) * 1000)
        beats.last["loop_lag"] = ctx.clock.monotonic()
