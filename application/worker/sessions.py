"""Sessions: the connections this worker owns, the tasks that run them, and lease-before-connect."""

import asyncio
import contextlib
import logging
import math
from collections.abc import Collection, Iterator, Mapping, Sequence

from application.aio import first_completed, gather_all
from application.errors import SinkUnavailable, StoreUnavailable
from application.ports import HintOrigin
from application.ports.metrics import (
    ACQUISITION_CONFLICTS,
    BALANCE_HANDOFFS,
    HANDOFF_WAIT_MS,
    LEASE_ACQUISITIONS,
    TAKEOVERS,
)
from application.worker.balance import MOVED_HOLD_LEASES, Balance
from application.worker.context import WorkerContext
from application.worker.ingest import IngestWriter
from application.worker.lease import Lease
from application.worker.session import ConnectionSession, SessionEnd
from application.worker.session_keeper import SessionKeeper
from application.worker.take_limit import TakeLimit
from domain import Connection, DesiredState, Event, LeaseAcquired, LeaseTakenOver
from domain.balance import Rate, cost, pick_hand_offs, smoothed

log = logging.getLogger(__name__)


class Sessions:
    def __init__(self, ctx: WorkerContext, writer: IngestWriter, keeper: SessionKeeper) -> None:
        self._ctx = ctx
        self._writer = writer
        self._keeper = keeper
        self._running: dict[str, tuple[ConnectionSession, asyncio.Task[SessionEnd]]] = {}
        self._acquiring: set[str] = set()
        self._limit = TakeLimit(ctx.config)
        self.handed_over: list[str] = []  # released during shutdown: hint the fleet
        self.handed_over_changed = asyncio.Event()  # set as each is added
        self.balance = Balance(ctx, lambda: keeper.session_id, self._held, self.rate_now)
        # Each running connection's smoothed message rate, sampled with every renew.
        self._rates: dict[str, Rate] = {}
        # Moved in and not measured yet: its releaser's measure, if its hint said it
        # (HintOrigin.rate; `_take`).
        self._hinted_rate: dict[str, float] = {}
        # rate_now's parts, until either changes: the measured connections' sum, and how
        # many are not measured yet (Balance.unmeasured_rate each).
        self._rate_total: tuple[float, int] | None = None
        # Moved in (taken from another owner) at this monotonic instant: measured from a lease
        # after (`_take`), not handed off to balance for MOVED_HOLD_LEASES (`hand_off`).
        self._moved_in: dict[str, float] = {}
        self.leaving: set[str] = set()  # handed off to balance, not yet released
        # Handed off to balance: not taken back before the monotonic instant given (its hint
        # is for a worker below its share; if none takes it by then, this one may).
        self._handed_off: dict[str, float] = {}
        # A scan's dead sessions' connections being placed (Sessions.placing): the ids, and
        # how many more of them this worker takes (its part).
        self._placing: frozenset[str] = frozenset()
        self._budget = 0
        self.lost = 0  # acquisitions another worker won, ever (the scan reads how many lately)

    @property
    def writer(self) -> IngestWriter:
        return self._writer

    def __len__(self) -> int:
        return len(self._running)

    def __contains__(self, connection_id: object) -> bool:
        """Running here (perhaps only finishing) or being acquired: not to be taken again."""
        return connection_id in self._running or connection_id in self._acquiring

    def holds(self, connection_id: str) -> bool:
        """Held by this worker now: being acquired, or running and not yet handed back. A hint
        for one held is a duplicate; for one handed back whose task is still finishing, it is
        the fleet's (a handoff's hint can reach this worker's own poll before that task ends:
        the AWS chaos run, where deleting it left the connection to a full scan)."""
        entry = self._running.get(connection_id)
        return connection_id in self._acquiring or (entry is not None and not entry[0].handed_back)

    def __iter__(self) -> Iterator[ConnectionSession]:
        return iter([session for session, _ in self._running.values()])

    @property
    def free(self) -> int:
        """Room to take more. None without a trusted session: a hint received then would be
        deleted untaken, leaving its connection to someone's next scan."""
        return min(self.capacity_free, self.balance.room())

    @property
    def capacity_free(self) -> int:
        """Room by capacity alone: for a dead worker's connections past the placement grace
        (they have been down a lease already), and as the bound of every other room."""
        if not self._keeper.trusted:
            return 0
        return self._ctx.config.max_connections - self._held()

    @property
    def full(self) -> bool:
        """No room whatever the balance: at capacity, or no trusted session."""
        return self.capacity_free <= 0

    @property
    def at_capacity(self) -> bool:
        """Holding (or acquiring) as many as it may, trusted or not."""
        return self._held() >= self._ctx.config.max_connections

    def _held(self) -> int:
        return len(self._running) + len(self._acquiring)

    def _handed_off_lately(self, connection_id: str) -> bool:
        until = self._handed_off.get(connection_id)
        if until is None:
            return False
        if self._ctx.clock.monotonic() < until:
            return True
        del self._handed_off[connection_id]
        return False

    def sample_rates(self, now_ms: int) -> float:
        """Sample every running connection's message rate (domain/balance.py `smoothed`) and
        return their sum, messages a second: the load the heartbeat reports."""
        rates = {}
        # A first interval of at least half a heartbeat: one taken just before this sample
        # is measured at the next (counted at the fleet's mean meanwhile: rate_now).
        first_ms = int(self._ctx.config.heartbeat_interval_s * 500)
        replaying_s = self._ctx.config.lease_ms / 1000
        for cid, (session, _) in self._running.items():
            if self._moved_in_for(cid) < replaying_s:
                continue  # moved in a moment ago: still replaying (see _take)
            rate = self._rates.get(cid, Rate())
            rates[cid] = smoothed(rate, session.received, now_ms, first_ms=first_ms)
        self._rates = rates
        self._rate_total = None
        return self.rate_now()

    def rate_now(self) -> float:
        """The smoothed messages a second of the connections running here, as last sampled;
        one not measured over an interval yet (just taken, or STARTed) at the rate its hint
        said, or else at the fleet's mean (`Balance.unmeasured_rate`). Counted at 0, a
        connection that had just moved in made its taker look light to every view read
        before its next heartbeat, and a worker holding less than the mean handed one off to
        balance toward it (the chaos soak by load, bench/RESULTS.md section 37). The sum is
        kept until a sample or a connection comes or goes: every look at the balance reads
        it, and summing it afresh cost a walk of every connection each time (the simulation
        at 100 workers: 2.8 million steps in 100 virtual seconds)."""
        if self._rate_total is None:
            total, unmeasured = 0.0, 0
            for cid in self._running:
                rate = self._rates.get(cid)
                if rate is not None and rate.warm:
                    total += rate.per_s
                elif cid in self._hinted_rate:
                    total += self._hinted_rate[cid]
                else:
                    unmeasured += 1
            self._rate_total = (total, unmeasured)
        total, unmeasured = self._rate_total
        return total + unmeasured * self.balance.unmeasured_rate() if unmeasured else total

    def hand_off(self, count: int) -> list[str]:
        """Hand up to `count` connections to the fleet by the graceful path (drain, release
        with the final checkpoint, hint). Chosen so the move costs least: none that moved in
        lately (`MOVED_HOLD_LEASES`) while others can go, so that a connection a fault just
        moved is not bounced on (by count, only if nothing else is left: a caller's count is
        honoured); streaming ones first (one reconnecting would only restart its back-off),
        the fewest messages left to drain, then the most recently taken (those held long stay
        put). By load, of those, the ones whose moves best close the gap (domain/balance.py
        `pick_hand_offs`), and none that moved in lately."""
        hold_s = MOVED_HOLD_LEASES * self._ctx.config.lease_ms / 1000

        def moved_lately(s: ConnectionSession) -> bool:
            return self._moved_in_for(s.connection_id) < hold_s

        candidates = [s for s, _ in reversed(self._running.values()) if not s.stopping]
        candidates.sort(key=lambda s: (moved_lately(s), not s.upstream_open, s.ingest.pending))
        chosen = candidates[:count]
        share = self.balance.share() if self.balance.by_load else None
        if share is not None and share.excess > 0:  # (a caller's own count otherwise)
            settled = [s for s in candidates if not moved_lately(s)]
            costs = [(s.connection_id, cost(self._rate_of(s.connection_id))) for s in settled]
            picked = dict(pick_hand_offs(costs, share, count))
            chosen = [s for s in settled if s.connection_id in picked]
            for session in chosen:
                session.meant_for = picked[session.connection_id]
                session.rate_handed_off = self._rate_of(session.connection_id)
        for session in chosen:
            self.leaving.add(session.connection_id)
            session.request_stop(SessionEnd.REBALANCE)
        return [s.connection_id for s in chosen]

    def placement(self) -> dict[str, tuple[str, float]]:
        """By load, the session each heavy running connection is meant for if this worker
        leaves now, and its rate (Balance.placement); empty by count."""
        if not self.balance.by_load:
            return {}
        rates = {cid: self._rate_of(cid) for cid in self._running}
        placed = self.balance.placement(list(rates.items()))
        return {cid: (to, rates[cid]) for cid, to in placed.items()}

    def _moved_in_for(self, connection_id: str) -> float:
        """Seconds since the connection moved in here (infinite: it did not, a START's)."""
        since = self._moved_in.get(connection_id)
        return math.inf if since is None else self._ctx.clock.monotonic() - since

    def _rate_of(self, connection_id: str) -> float:
        rate = self._rates.get(connection_id)
        if rate is not None and rate.warm:
            return rate.per_s
        return self._hinted_rate.get(connection_id, self.balance.unmeasured_rate())

    async def take_each(
        self,
        candidates: Sequence[tuple[str, bool]],
        origins: Mapping[str, HintOrigin] | None = None,
    ) -> list[str]:
        """Take each (connection_id, by_capacity) while there is room, in order, in waves of
        up to `TakeLimit.current` acquisitions at once (see take_limit.py: one at a time, a
        dead worker's share of thousands would move at one store round trip per connection).
        Returns the ids not tried for want of room. A failed take (StoreUnavailable) is raised
        once its wave has ended; the rest are left to the loop's next round."""
        no_room: list[str] = []
        pending = list(candidates)
        origin_of = origins or {}
        while pending:
            size = self._limit.current
            wave, pending = pending[:size], pending[size:]
            if all(self._declined(cid, dead) for cid, dead in wave) and await self._declining(wave):
                no_room += [cid for cid, _ in wave]
                continue
            round_trips: list[float] = []
            # gather_all: one failed take must not leave the others running unowned; and
            # cancelling this call cancels and awaits every one of them.
            try:
                await gather_all(
                    *(
                        self._take_if_room(cid, dead, no_room, round_trips, origin_of.get(cid))
                        for cid, dead in wave
                    )
                )
            except Exception:
                self._limit.after_wave(None)
                raise
            if round_trips:
                self._limit.after_wave(max(round_trips))
        return no_room

    async def _take_if_room(
        self,
        connection_id: str,
        by_capacity: bool,
        no_room: list[str],
        round_trips: list[float],
        origin: HintOrigin | None = None,
    ) -> None:
        if self._declined(connection_id, by_capacity):
            no_room.append(connection_id)  # given back: another worker may take it
            return
        await self._take(connection_id, by_capacity, round_trips, origin)

    async def _declining(self, wave: Sequence[tuple[str, bool]]) -> bool:
        """Whether a wave that would be declined whole now still is where its first task would
        look, a round of the event loop later; if so, the rounds its tasks and their gather
        would take pass as they would (the loop runs the others' callbacks in the same order),
        without a task. A survivor of an AZ loss declines most of the scan once its part is
        taken: at 300 workers, 1.6 million such tasks in 21 virtual seconds, a fifth of the
        simulation's time (bench/RESULTS.md section 31)."""
        await asyncio.sleep(0)  # where the wave's first task would run
        if not all(self._declined(cid, dead) for cid, dead in wave):
            return False
        await asyncio.sleep(0)  # where the tasks' ends would be gathered
        await asyncio.sleep(0)  # where take_each would go on
        return True

    def _declined(self, connection_id: str, by_capacity: bool) -> bool:
        """Given back untried: handed back here and still finishing, no room for it, or
        handed off to balance lately."""
        finishing = connection_id in self and not self.holds(connection_id)
        no_room_for_it = connection_id not in self and self._room(connection_id, by_capacity) <= 0
        return finishing or no_room_for_it or self._handed_off_lately(connection_id)

    @contextlib.contextmanager
    def placing(self, connection_ids: Collection[str], *, found: bool = True) -> Iterator[None]:
        """While the orphan scan takes a page (`found`: all of the dead's it found), or the
        poll a batch of a reported death's hints (only some of them): these dead sessions'
        connections are placed, this worker taking only its part of them (its target with
        them counted in), so that a dead worker's connections spread over the survivors in
        one move."""
        budget = (
            self.balance.takeover_budget(len(connection_ids), found=found)
            if connection_ids
            else None
        )
        if budget is None:
            yield
            return
        # The orphan scan and the hint poll may place at once (a reported death's hints, and
        # the same dead session's connections found by a scan): one part for both. Each
        # budget is the target less what is held or being acquired when it is worked out, so
        # the smaller of the two is what is left of the part.
        ids = frozenset(connection_ids) - self._placing
        self._budget = min(self._budget, budget) if self._placing else budget
        self._placing |= ids
        try:
            yield
        finally:
            self._placing -= ids
            if not self._placing:
                self._budget = 0

    def _room(self, connection_id: str, by_capacity: bool) -> int:
        """A connection being placed: what is left of this worker's part. One open to all
        (`by_capacity`: a dead owner's past the placement grace, or one that waited the grace
        for an owner, Balance.waited_out): capacity alone. Any other: this worker's share."""
        if connection_id in self._placing:
            return min(self.capacity_free, self._budget)
        return self.capacity_free if by_capacity else self.free

    async def _take(
        self,
        connection_id: str,
        by_capacity: bool,
        round_trips: list[float],
        origin: HintOrigin | None = None,
    ) -> None:
        """`by_capacity`: the caller saw the owner's session dead (the orphan scan, a reported
        death's hint: room is then this worker's part of the dead's connections while they are
        placed), or the connection open to all (past the placement grace: a dead owner's, a
        leaving releaser's, one unowned that long): room is capacity alone (`_room`). Whether
        the acquire was a takeover is the store's answer, not this. `origin`: the session its
        hint says released it (the balance counts it once: `Balance.took`)."""
        ctx, keeper = self._ctx, self._keeper
        if connection_id in self or self._room(connection_id, by_capacity) <= 0:
            return
        if self._handed_off_lately(connection_id):
            return
        # The session this take is made under, captured before the call: if it is fenced
        # meanwhile, the lease is born untrusted and ends at once.
        session_id, fenced = keeper.session_id, keeper.fenced()
        if not keeper.trusts(session_id):
            return  # no live session (fenced, reopening): take nothing
        self._acquiring.add(connection_id)
        # Counted against this worker's part before the call, as `_acquiring` counts against
        # its room: the takes of one wave run side by side. Given back unless it is taken.
        placed = connection_id in self._placing
        self._budget -= placed
        acquired: Connection | None = None
        try:
            started = ctx.clock.monotonic()
            now_ms = ctx.clock.now_ms()
            # Whether the previous owner died without a final checkpoint, as the store's answer
            # says: None when the answer was lost and only the stored item shows the grant.
            took_over: bool | None
            released_at_ms: int | None = None  # when its releaser let it go, by the grant
            try:
                granted = await ctx.store.acquire_lease(connection_id, session_id, now_ms)
                round_trips.append(ctx.clock.monotonic() - started)
                acquired = None if granted is None else granted.connection
                took_over = granted is not None and any(
                    isinstance(e, LeaseTakenOver) for e in granted.events
                )
                if granted is not None:
                    self._record_wait(granted.events, now_ms)
                    released_at_ms = next(
                        (
                            e.free_since_ms
                            for e in granted.events
                            if isinstance(e, LeaseAcquired) and e.free_since_ms
                        ),
                        None,
                    )
            except StoreUnavailable:
                acquired, took_over = await self._granted_after_all(connection_id, session_id), None
                if acquired is None:
                    raise
            if acquired is None:
                ctx.metrics.count(ACQUISITION_CONFLICTS)
                self.lost += 1
                return
            # A dead owner may have stored more than its last checkpoint says; a release
            # records the final checkpoint of everything written (one read saved per handoff).
            clean = took_over is False
            resume = acquired.checkpoint_seq if clean else await self._resume_point(acquired)
        finally:
            self._acquiring.discard(connection_id)
            if acquired is None:
                self._budget += placed
        ctx.metrics.count(LEASE_ACQUISITIONS)
        if took_over or released_at_ms is None:
            self.balance.took(now_ms)
        else:
            self.balance.took(now_ms, origin, released_at_ms)
        if took_over:
            ctx.metrics.count(TAKEOVERS)
        log.info(
            "lease acquired, resuming from seq %d",
            resume + 1,
            extra=ctx.log_extra(connection_id, acquired.token),
        )
        lease = Lease(ctx, keeper, connection_id, acquired.token, session_id, fenced)
        session = ConnectionSession(ctx, acquired, lease, resume, self._writer, self._handed_back)
        task = asyncio.create_task(session.run(), name=f"session:{connection_id}")
        self._running[connection_id] = (session, task)
        if acquired.token > 1:
            # It had an owner before: it moved in. It resumes from its last checkpoint, and the
            # upstream replays what came since at once. Counted as its rate, a hot stream
            # unowned for 6.5 s under a store fault measured some 60 % above its rate for the
            # window, and the fleet moved a quiet stream for it (the chaos soak by load,
            # bench/RESULTS.md section 38). It is measured from a lease after the take
            # (`sample_rates`), at the rate its hint said meanwhile.
            self._moved_in[connection_id] = ctx.clock.monotonic()
            if origin is not None and origin.rate is not None:
                self._hinted_rate[connection_id] = origin.rate
        else:
            # Measured from now, not from the next sample: the first report after the take
            # then carries its rate (rate_now counts it at the fleet's mean until then).
            self._rates[connection_id] = smoothed(Rate(), 0, ctx.clock.now_ms())
        self._rate_total = None
        task.add_done_callback(lambda _: self._done(connection_id, session))

    def _record_wait(self, events: Sequence[Event], now_ms: int) -> None:
        """The acquiring side of a handoff: how long the connection had been free. Only after
        a previous owner (token above 1): a first lease measures the START, not a handoff."""
        for e in events:
            if isinstance(e, LeaseAcquired) and e.token > 1 and e.free_since_ms:
                self._ctx.metrics.timing(HANDOFF_WAIT_MS, max(0, now_ms - e.free_since_ms))

    async def _resume_point(self, acquired: Connection) -> int:
        """Where to resume: the stored checkpoint, or further if the sink durably stored more
        (a previous owner that crashed between checkpoints). If the sink cannot say, the
        checkpoint: the messages after it are received again and stored idempotently."""
        try:
            stored = await self._ctx.sink.resume_point(
                acquired.connection_id, acquired.checkpoint_seq
            )
        except Exception as exc:
            # SinkUnavailable, or whatever a user's sink raises when it is down: an outage of
            # the sink must not keep the connection from being streamed.
            log.warning(
                "resume point not read, resuming from the checkpoint: %s",
                exc,
                exc_info=not isinstance(exc, SinkUnavailable),
                extra=self._ctx.log_extra(acquired.connection_id, acquired.token),
            )
            return acquired.checkpoint_seq
        return acquired.checkpoint_seq if stored is None else max(stored, acquired.checkpoint_seq)

    async def _granted_after_all(self, connection_id: str, session_id: str) -> Connection | None:
        """After a try_acquire whose outcome is unknown: the grant may
        have landed with its answer lost, which would leave the connection owned by a live
        session that runs nothing for it. The stored item proves it is ours when it names our
        session: we hold no other lease on it (`_acquiring` keeps takes of one id apart, and a
        connection we run is never taken again). Raises StoreUnavailable if the store cannot
        be read either."""
        ctx = self._ctx
        current = await ctx.store.get(connection_id)
        granted = (
            current is not None
            and current.owner == session_id
            and current.desired_state is DesiredState.STARTED
        )
        if not granted:
            return None
        log.info(
            "lease acquired (its answer was lost, the stored item shows it)",
            extra=ctx.log_extra(connection_id),
        )
        return current

    def _done(self, connection_id: str, session: ConnectionSession) -> None:
        entry = self._running.get(connection_id)
        if entry is not None and entry[0] is session:
            del self._running[connection_id]
            self._rate_total = None
            self._rates.pop(connection_id, None)
            self._hinted_rate.pop(connection_id, None)
            self._moved_in.pop(connection_id, None)
        if session.end is SessionEnd.SHUTDOWN:
            self.handed_over.append(connection_id)
            self.handed_over_changed.set()
        if connection_id in self.leaving:
            self.leaving.discard(connection_id)
            self.balance.handed_off(self._ctx.clock.now_ms())
        if session.end is SessionEnd.REBALANCE:
            self._ctx.metrics.count(BALANCE_HANDOFFS)
        if session.end is SessionEnd.LEASE_LOST and not session.lease.taken_over:
            self._limit.fenced()  # it could not keep a lease: take no more at once

    def _handed_back(self, connection_id: str, end: SessionEnd) -> None:
        """Told by a session as the store takes its connection back, before the hint: a
        handoff's hint that reaches this worker's own poll then finds it not to be taken."""
        if end is SessionEnd.REBALANCE:
            lease_s = self._ctx.config.lease_ms / 1000
            self._handed_off[connection_id] = self._ctx.clock.monotonic() + lease_s

    def stop(self, connection_id: str, reason: SessionEnd) -> None:
        entry = self._running.get(connection_id)
        if entry is not None:
            entry[0].request_stop(reason)

    async def stop_all(self, reason: SessionEnd, budget_s: float) -> None:
        """Ask every session to end, concurrently; cancel whatever outlives the budget."""
        tasks = [task for _, task in self._running.values()]
        for session, _ in self._running.values():
            session.request_stop(reason)
        if not tasks:
            return

        async def all_done() -> None:
            await asyncio.wait(tasks)

        await first_completed(all_done(), self._ctx.clock.sleep(budget_s))
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def cancel_all(self) -> None:
        tasks = [task for _, task in self._running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
