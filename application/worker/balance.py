"""Balance: this worker's view of the fleet's loads and what the balancing rule
(domain/balance.py) makes of it, read by every take (`room`) and by the sessions watch
(`hand_off_now`).

The view is the sessions list the reconcile loop reads about once a lease; this worker's own
load is always what it holds now. A view older than two leases is not trusted (the loop cannot
reach the store): the worker then takes whatever its capacity allows, as without balancing,
so that a stale view never leaves a connection orphaned.

**Counted once.** A connection this worker took through a hint that names its releaser
(`HintOrigin`) is still in that releaser's load as last reported, until its next report; the
view counts it there no more (`_view`). Such a take is accounted for, so it does not make the
view "not caught up" (domain/balance.py), which would let this worker take up to its capacity:
two newcomers joining, the first to poll took 14 of the 20 that two workers handed off, and
balancing moved 4 of them again (bench/RESULTS.md section 31). And a hint from a releaser
handing off to balance, taken on a view that sees the fleet balanced, says the view is older
than the releaser's (`behind`): it is read again first.

**Leaving.** A shutting-down worker's hints say so (`HintOrigin.leaving`). Its session is
still live, and reports what it still holds, until its handoff ends; a taker counts it at
capacity 0 from its first such hint, so its connections are split over the others' targets
and go where the fleet is short (a rolling deploy's newcomer) in one move. Taking them by
capacity, an old worker whose view was read before the newcomer joined took a share of them
that balancing then moved on (the fleet bench's handoff rounds, the chaos suite's rolling
restart). A view older than `BEHIND_RECHECK_BEATS` is read again first, for the newcomer; past
`LEAVING_GRACE_BEATS` from the first hint, they are open to all by capacity, and a worker at
its share receives hints again to take them (`leavers_open`). A leaver is remembered after its
session ends: its late hints name connections it released, not a dead session's.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from application.ports import HintOrigin
from application.worker.context import WorkerContext
from domain import LEAVING_CAPACITY, WorkerSession
from domain.balance import (
    Load,
    Share,
    heavy,
    loads_of,
    mean_rate,
    place_heavy,
    take_order,
)
from domain.balance_view import FleetView

# By load: a connection that moved in is not handed off again for this many leases (the rate
# it brings is counted by the next views, and a second move within them would be a reaction
# to a view that had not caught up with the first).
MOVED_HOLD_LEASES = 4

# A view read less than this part of a heartbeat ago is not read again for a hint (`behind`).
BEHIND_RECHECK_BEATS = 0.25

# How long after a session died its connections are placed by share before they are open to
# all, in heartbeats: the survivors' watches see the death within a heartbeat of each other,
# and a part not taken by then is taken by whoever has room.
PLACEMENT_GRACE_BEATS = 2

# How long a leaving worker's connections are placed by share, in heartbeats from the first of
# its hints this worker saw: its hints all go out within its drain (tenths of a second), and a
# worker short of its share takes its part within a few receives. What views that disagree
# left over (a fleet still balancing a join when the deploy's next worker leaves) is then
# taken by whoever has room, within the handoff's 1 s: held to the dead's two heartbeats, four
# of one AWS fleet-bench round's 18 waited 2.5 s.
LEAVING_GRACE_BEATS = 0.5

# How long a heavy balancing hint meant for another session (HintOrigin.to) is left to it, in
# heartbeats from when this worker first received it: the addressee is polling, and takes it
# within a receive; one that cannot (full, slow, fenced, gone) leaves it to all after this.
ADDRESSED_GRACE_BEATS = 1.0


def died_at_ms(session: WorkerSession) -> int:
    """When a dead session died: when it was ended, or when its lease ran out."""
    if session.ended_reason is not None:
        return min(session.updated_at_ms, session.expires_at_ms)
    return session.expires_at_ms


@attrs.frozen
class _Split:
    """What the survivors held just before some sessions were seen dead (the view before
    the one that saw them dead, and this worker's own count then). The takes made since are
    what they hold beyond it.

    A view read after some survivors took the dead's connections counts those twice: still
    in what the dead last reported, and in the survivors' reports since (or, for this
    worker's own, in what it holds now). A survivor asking again (a hint batch declined,
    then retried on a fresh view; a second scan) would find room that is not there: the
    simulation's reported AZ loss at 10 workers gave the first six pollers 10 each of 60
    where the parts were 8-9, and balancing moved 8 of them again."""

    held: Mapping[str, int]
    mine: int
    at_ms: int

    @classmethod
    def of(cls, before: Sequence[Load], mine: int, now_ms: int) -> "_Split":
        return cls({load.session_id: load.held for load in before}, mine, now_ms)

    def taken_since(self, loads: Sequence[Load], mine: int) -> int:
        """The takes this view shows since the split: each survivor's growth, and this
        worker's own."""
        grown = sum(max(0, load.held - self.held.get(load.session_id, load.held)) for load in loads)
        return grown + max(0, mine - self.mine)


class Balance:
    def __init__(
        self,
        ctx: WorkerContext,
        session_id: Callable[[], str],
        held: Callable[[], int],
        rate: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._ctx = ctx
        self._session_id = session_id
        self._held = held  # connections held or being acquired now
        self._rate = rate  # their smoothed messages a second, as last sampled
        self._loads: list[Load] = []
        self._seen_at: float | None = None  # monotonic: when the view was read
        # No handoff until every other worker has reported its load at or after this (epoch
        # ms): the connections handed off last are then counted by whoever took them.
        self._settle_after_ms = 0
        self._view_ms = 0  # epoch ms the view was read at
        # A handoff first wanted on the view read at this instant (epoch ms): it is made only
        # if a view reported entirely after it still wants it (None: none wanted).
        self._wanted_since_ms: int | None = None
        self._last_take_ms = 0  # epoch ms this worker last took a connection
        # Dead sessions of the view: session id -> epoch ms it died, and the load it last
        # reported (what it held as it died: nobody else can have reported taking any of it).
        self._died_at: dict[str, int] = {}
        self._dead_held: dict[str, int] = {}
        # Takes through hints naming a live releaser: its session id -> when it released each
        # (its clock), counted off its load until it reports after them.
        self._taken_from: dict[str, list[int]] = {}
        # Bumped whenever the view or what is counted off it changes: the share and the view
        # are worked out again only then, or when this worker's own load or instants change
        # (`share`). Every take and every poll asks for the share, and working it out walks
        # the whole fleet: at 1,000 workers, that walk per ask was most of the simulation's
        # time (bench/RESULTS.md section 31).
        self._version = 0
        # Sessions whose hints said they are leaving: session id -> epoch ms of the first.
        self._leaving: dict[str, int] = {}
        # The split of the dead's connections last worked out (`_Split`).
        self._split: _Split | None = None
        self._view_cache: tuple[int, list[Load]] | None = None
        self._share_cache: tuple[tuple[object, ...], Share] | None = None
        self._fleet_cache: tuple[tuple[int, str], FleetView] | None = None
        self._mean_rate: tuple[int, float] | None = None  # (version, unmeasured_rate)
        # Heavy hints meant for another session (HintOrigin.to): connection id -> epoch ms
        # this worker first received one (`left_for_another`).
        self._addressed: dict[str, int] = {}
        self._live: tuple[int, frozenset[str]] | None = None  # (version, live session ids)

    @property
    def enabled(self) -> bool:
        return self._ctx.config.balance

    @property
    def by_load(self) -> bool:
        return self._ctx.config.balance_by == "load"

    def _me(self) -> Load:
        return Load(
            self._session_id(), self._held(), self._ctx.config.max_connections, rate=self._rate()
        )

    def observe(self, sessions: Sequence[WorkerSession], now_ms: int) -> None:
        dead = [s for s in sessions if not s.is_live(now_ms)]
        # The last view, only to tell who just died (each walk of the fleet here is made by
        # every worker at every look: made only when needed).
        before = {load.session_id: load for load in self._view()} if dead else {}
        self._loads = loads_of(sessions, now_ms, int(self._ctx.config.join_grace_s * 1000))
        if self._taken_from:
            reported = {load.session_id: load.reported_at_ms for load in self._loads}
            self._taken_from = {
                sid: later
                for sid, takes in self._taken_from.items()
                if sid in reported and (later := [t for t in takes if t > reported[sid]])
            }
        # A leaver is remembered past its end, while hints it sent may still come: they name
        # connections it released, not a dead session's (`open_to_all`).
        forget_ms = 2 * self._ctx.config.lease_ms
        self._leaving = {sid: at for sid, at in self._leaving.items() if now_ms - at < forget_ms}
        self._addressed = {c: at for c, at in self._addressed.items() if now_ms - at < forget_ms}
        self._died_at = {s.session_id: died_at_ms(s) for s in dead}
        self._dead_held = {s.session_id: s.held for s in dead}
        self._seen_at = self._ctx.clock.monotonic()
        self._view_ms = now_ms
        self._version += 1
        if any(s.session_id in before for s in dead):  # live in the last view: just died
            survivors = [load for sid, load in before.items() if sid not in self._died_at]
            self._split = _Split.of(survivors, self._held(), now_ms)

    def share(self) -> Share | None:
        """None while balancing is off or there is no fresh view of the fleet."""
        ctx = self._ctx
        if not self.enabled or self._seen_at is None:
            return None
        if ctx.clock.monotonic() - self._seen_at > 2 * ctx.config.lease_ms / 1000:
            return None
        me = self._me()
        settle_after_ms = max(self._settle_after_ms, self._wanted_since_ms or 0)
        key = (self._version, me, settle_after_ms, self._last_take_ms)
        if self._share_cache is not None and self._share_cache[0] == key:
            return self._share_cache[1]
        share = self._fleet(me).share(
            me,
            max_hand_offs=ctx.config.balance_handoffs_per_pass,
            settle_after_ms=settle_after_ms,
            last_take_ms=self._last_take_ms,
            by_load=self.by_load,
        )
        self._share_cache = (key, share)
        return share

    def unmeasured_rate(self) -> float:
        """What a connection whose rate is not measured yet (just taken, or STARTed) is
        counted at, messages a second: the mean of this view's connections, as the rule counts
        connections of unknown cost (domain/balance.py `mean_rate`); 0 without a view."""
        if self._mean_rate is None or self._mean_rate[0] != self._version:
            self._mean_rate = (self._version, mean_rate(self._loads))
        return self._mean_rate[1]

    def _view(self) -> list[Load]:
        """The live loads, with what this worker took from each since its last report
        counted off (its rate in proportion)."""
        if self._view_cache is None or self._view_cache[0] != self._version:
            self._view_cache = (self._version, self._counted_off())
        return self._view_cache[1]

    def _fleet(self, me: Load) -> FleetView:
        """The view as domain/balance_view.py keeps it for this worker's asks: share_of's
        answers, the fleet walked once per view rather than once per ask."""
        key = (self._version, me.session_id)
        if self._fleet_cache is None or self._fleet_cache[0] != key:
            self._fleet_cache = (key, FleetView(self._view(), me.session_id))
        return self._fleet_cache[1]

    def _counted_off(self) -> list[Load]:
        if not self._taken_from and not self._leaving:
            return self._loads  # nothing to count off or leave out (read only, as every view)
        loads: list[Load] = []
        for load in self._loads:
            if load.session_id in self._leaving:
                # It takes nothing: out of the split, as its session will say (Load.leaving).
                load = attrs.evolve(load, capacity=LEAVING_CAPACITY)
            taken = sum(
                1 for t in self._taken_from.get(load.session_id, ()) if t > load.reported_at_ms
            )
            if not taken:
                loads.append(load)
                continue
            held = max(0, load.held - taken)
            rate = load.rate * held / load.held if load.held else load.rate
            loads.append(attrs.evolve(load, held=held, rate=rate))
        return loads

    def note_leaving(self, origins: Iterable[HintOrigin]) -> None:
        """Hints said these sessions are leaving (shutting down): from now on they are out of
        the split (`_counted_off`)."""
        now_ms = self._ctx.clock.now_ms()
        mine = self._session_id()
        for origin in origins:
            sid = origin.session_id
            if origin.leaving and sid != mine and sid not in self._leaving:
                self._leaving[sid] = now_ms
                self._version += 1

    def open_to_all(self, origin: HintOrigin | None, now_ms: int) -> bool:
        """Whether a connection whose hint names `origin` is taken by capacity, not by this
        worker's share: a leaver's (ended since or not), once it has been leaving for longer
        than `LEAVING_GRACE_BEATS` (the workers short of their share did not take it: full,
        slow, fenced or gone, or views that disagreed left it to nobody); a dead session's
        otherwise (within the placement grace the dead's are placed: `placing`)."""
        if origin is None:
            return False
        since = self._leaving.get(origin.session_id)
        if origin.leaving and since is not None:
            # Ended or not: what it released is placed by share for the grace, then open.
            grace_ms = LEAVING_GRACE_BEATS * self._ctx.config.heartbeat_interval_s * 1000
            return now_ms - since >= grace_ms
        return self.dead(origin.session_id)

    def placement(self, rates: Sequence[tuple[str, float]]) -> dict[str, str]:
        """By load, the session each of a leaving worker's heavy connections (id, rate) is
        meant for (domain/balance.py `place_heavy`): over the live sessions of a fresh view
        that are neither leaving nor full, newcomers in their join grace included. Empty by
        count, or without a fresh view: the hints then name no taker."""
        if not self.by_load or self.share() is None:
            return {}
        mine = self._session_id()
        takers = [
            (load.weight, load.held, load.session_id)
            for load in self._view()
            if load.session_id != mine and not load.leaving and load.held < load.capacity
        ]
        return place_heavy(rates, takers, self.unmeasured_rate())

    def meant_for_me(self, origin: HintOrigin | None) -> bool:
        """A balancing hint by load meant for this worker: its releaser placed it here (it
        fits this worker's gap by that view: domain/balance.py `pick_hand_offs`), so it is
        taken by capacity, not by this worker's own, possibly older, share. The others take
        it by their share, as any hint, unless it is heavy (`left_for_another`)."""
        return origin is not None and origin.to == self._session_id()

    def left_for_another(self, connection_id: str, origin: HintOrigin | None, now_ms: int) -> bool:
        """A heavy balancing hint (domain/balance.py `heavy`, by this view's mean) meant for
        another live session, that this worker first received less than
        `ADDRESSED_GRACE_BEATS` ago: left to that one. Past that, or once the view no longer
        has it live, anyone's by share. A hot feed taken by whoever polled first went to a
        worker already at its level, which handed its own hot feed on: the skewed fleet's four
        passed from worker to worker (the real-process skew bench: 147 s to within 1.25x and
        still moving, against 34 s so). Light ones are not left: at 100 workers the others
        received them and gave them back until their one taker did (the simulated scale-out
        by load: gaps p50 1.5 s against 0.15 s)."""
        if origin is None or origin.to is None or origin.to == self._session_id():
            return False
        if origin.rate is None or not heavy(origin.rate, self.unmeasured_rate()):
            return False
        if self._live is None or self._live[0] != self._version:
            self._live = (self._version, frozenset(x.session_id for x in self._loads))
        if origin.to not in self._live[1]:
            return False
        first = self._addressed.setdefault(connection_id, now_ms)
        # A leaver's, for as long as its connections are placed by share (the handoff's 1 s).
        beats = LEAVING_GRACE_BEATS if origin.leaving else ADDRESSED_GRACE_BEATS
        return now_ms - first < beats * self._ctx.config.heartbeat_interval_s * 1000

    def leavers_open(self, now_ms: int) -> bool:
        """Some leaver this worker saw has been leaving for longer than `LEAVING_GRACE_BEATS`,
        by less than a heartbeat more: its connections are open to all, so a worker at its
        share receives hints again for that heartbeat. Not longer: receiving at its share, it
        holds up and declines the hints meant for the workers short of theirs (open for two
        leases, the AWS fleet bench's handoff p50 went from 0.53 s to 0.86-1.10 s)."""
        beat_ms = self._ctx.config.heartbeat_interval_s * 1000
        grace_ms = LEAVING_GRACE_BEATS * beat_ms
        return any(grace_ms <= now_ms - at < grace_ms + beat_ms for at in self._leaving.values())

    def waited_out(self, unowned_since_ms: int, now_ms: int) -> bool:
        """Whether a connection that wants an owner since `unowned_since_ms` (released,
        STARTed) has waited the placement grace: then whoever has room takes it, by capacity.
        Left to the workers short of their share, it would wait as long as one of them is
        live and cannot take it (a failing store, a fenced session): the bound on that wait."""
        return now_ms - unowned_since_ms >= self._grace_ms()

    def placing(self, owner: str, now_ms: int) -> bool:
        """Whether a connection of the dead session `owner` is placed by share: its owner
        died within the placement grace. Past it the connection is open to all, whoever's
        part it was: a survivor that could not take its part (full, slow, fenced, dead too)
        never leaves it unowned for longer."""
        died_at = self._died_at.get(owner)
        return self.enabled and died_at is not None and now_ms - died_at < self._grace_ms()

    def dead(self, session_id: str) -> bool:
        """Whether the view saw this session dead (a hint's origin: a reported death)."""
        return session_id in self._died_at

    def _placing_any(self, now_ms: int) -> bool:
        return any(now_ms - died_at < self._grace_ms() for died_at in self._died_at.values())

    def _grace_ms(self) -> float:
        return PLACEMENT_GRACE_BEATS * self._ctx.config.heartbeat_interval_s * 1000

    def takeover_budget(self, unplaced: int, *, found: bool = True) -> int | None:
        """How many of `unplaced` dead sessions' connections (found by a scan; `found`
        False: hinted, a batch of them) this worker takes: its part of the split that counts
        them in, or None without a view (then capacity alone decides).

        Counted in are as many as the scan found or, if more, as many as the sessions dying
        within the grace last reported holding: every survivor reads those alike, while what
        a scan finds depends on when it ran (a survivor scanning after others took their
        parts, and before they reported them, would see too few and take too few); less the
        takes since their death this view shows (`_Split`), which it counts already."""
        ctx = self._ctx
        if not self.enabled or self._seen_at is None:
            return None
        now_ms = ctx.clock.now_ms()
        reported = sum(
            held
            for sid, held in self._dead_held.items()
            if now_ms - self._died_at[sid] < self._grace_ms()
        )
        split = self._split
        if split is not None and now_ms - split.at_ms < self._grace_ms():
            # Less what the view shows taken since they died (see _Split), never less than
            # the scan found: a worker that took connections after its last report died
            # holding more than it reported.
            reported -= split.taken_since(self._view(), self._held())
        # A batch of hints (not `found`) is not all that is left: the dead's report less what
        # the view shows taken is, unless the dead reported nothing left (their reports lag).
        counted = max(unplaced, reported) if found or reported <= 0 else reported
        me = self._me()
        share = self._fleet(me).share(
            me,
            max_hand_offs=0,
            last_take_ms=self._last_take_ms,
            unplaced=counted,
            by_load=self.by_load,
        )
        return share.takeover_room

    def take_order(self, connection_ids: Sequence[str]) -> list[str] | None:
        """The order to try orphans in so that the workers of this view try different ones
        first (domain/balance.py `take_order`); None without a view."""
        if self._seen_at is None:
            return None
        # The leaving take nothing: the others try their orphans first instead.
        live = [load.session_id for load in self._loads if not load.leaving]
        return take_order(connection_ids, self._session_id(), live)

    def moving(self) -> bool:
        """The fleet is out of balance by this worker's view: look again every heartbeat
        (the sessions watch reads once a lease otherwise), so that decisions are taken on
        fresh loads while connections move, at no cost in a balanced fleet."""
        share = self.share()
        return share is not None and share.imbalanced

    def room(self) -> int:
        """How many more this worker may take now, by the rule (its capacity bounds it too)."""
        share = self.share()
        if share is None:
            return self._ctx.config.max_connections - self._held()
        return share.room

    def hand_off_now(self) -> int:
        """How many to hand off on this view: only what a second view, reported entirely
        after the first that wanted a handoff, still wants (docs/decisions.md: a load moved
        within a heartbeat before a view is misreported in it)."""
        share = self.share()
        if share is None or not share.imbalanced or share.excess <= 0:
            self._wanted_since_ms = None
            return 0
        if self._placing_any(self._ctx.clock.now_ms()):
            # A dead worker's connections are being placed: the view is about to change,
            # and a handoff now would leave its connection to a worker that may be taking
            # its own part, or failing to.
            return 0
        if self._wanted_since_ms is None:
            self._wanted_since_ms = self._view_ms
            return 0
        return share.hand_off

    def behind(self, origins: Iterable[HintOrigin]) -> bool:
        """Whether hints about to be taken say this worker's view is older than their
        releasers': a live session handing off to balance does so on a view it found out of
        balance (or it is one this view does not know), so a view that sees the fleet
        balanced missed something (a join, read a lease ago: the old worker would take what
        the newcomers are short of). Then the view is read again before taking: one read,
        only while connections are handed back, at most once per `BEHIND_RECHECK_BEATS`."""
        mine = self._session_id()
        # A dead origin's hints are a reported death's, placed by share (`placing`), not a
        # hand-back on a view of its own.
        balancing = [o for o in origins if o.session_id != mine and not self.dead(o.session_id)]
        if not balancing or not self.enabled or self._seen_at is None:
            return False
        fresh_s = BEHIND_RECHECK_BEATS * self._ctx.config.heartbeat_interval_s
        if self._ctx.clock.monotonic() - self._seen_at < fresh_s:
            return False  # read just now: a hand-back storm costs a read per this at most
        if any(o.leaving for o in balancing):
            # A worker leaving: who it leaves to is decided on this view, which may predate
            # its replacement (a rolling deploy starts the new one first).
            return True
        known = {load.session_id for load in self._loads}
        if any(o.session_id not in known for o in balancing):
            return True
        share = self.share()
        return share is not None and not share.imbalanced

    def took(
        self, at_ms: int, origin: HintOrigin | None = None, released_at_ms: int | None = None
    ) -> None:
        """This worker took a connection at `at_ms`. Released (at `released_at_ms`, by the
        releaser's clock, as its reports are) by a session of the view (`origin`): counted
        off that session's load until it reports after the release, and the view stays whole.
        A leaver's (`origin.leaving`), known to the view or not: accounted too. Out of the split
        it takes nothing back, and once its session has ended (most of a deploy's hints are
        taken then) the view has no entry for it: nothing of it is counted twice, and what the
        other takers have not reported yet only makes this worker's part look smaller. Taken as
        unknown, each set the view "not caught up" for a heartbeat, its room became its
        capacity, and the simulation's deploy at 100 workers had newcomers take 185-200 of
        their leavers' hints against targets of 93: 5,563 such takes, 1,558 balancing moves on
        (bench/RESULTS.md section 34).
        Otherwise (a START, an orphan, a releaser the view does not know): until every other
        worker has reported its load after it, the view cannot hold taking back
        (domain/balance.py)."""
        known = origin is not None and any(x.session_id == origin.session_id for x in self._loads)
        if origin is not None and known and released_at_ms is not None:
            if origin.session_id != self._session_id():
                self._taken_from.setdefault(origin.session_id, []).append(released_at_ms)
                self._version += 1
            return
        if origin is not None and origin.leaving:
            return
        self._last_take_ms = max(self._last_take_ms, at_ms)

    def handed_off(self, at_ms: int) -> None:
        """A handoff to balance ended at `at_ms`: wait for the takers to report it. A taker
        takes a hint at once, so its next renew (a heartbeat later at most) counts it."""
        heartbeat_ms = int(self._ctx.config.heartbeat_interval_s * 1000)
        self._settle_after_ms = max(self._settle_after_ms, at_ms + heartbeat_ms)
