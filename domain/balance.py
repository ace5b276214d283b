"""The fleet's balancing rule: from the live worker sessions' loads, one worker's
share, how many connections it should hand off now, and how many it may take.

Pure: the sessions (with the load each reported at its last renew) and `now_ms` are handed in.
docs/decisions.md ("Balance") argues why stale loads cannot make two workers shed the same
excess back and forth.

- **Level**: the even split of everything held, bounded by each worker's capacity (water
  filling: a worker that cannot take its even share holds its capacity, the rest share what
  is left). **Target**: the level in whole connections; the remainder goes one each to the
  workers holding most (then by session id), so that reaching it moves the fewest.
- **Hysteresis**: nothing moves unless some worker is further than its band from its level
  (band = max(1, 10 % of the level)); then each worker above its target hands off down to it,
  at most `max_hand_offs` per pass, and only once every other worker has reported its load
  since this worker's last handoff (`settle_after_ms`).
- **Taking**: while some worker is short of its level by more than its band, a worker takes
  only up to its own target (one at or above it leaves hints and orphans to the short ones);
  when none is, anyone takes up to its capacity, so that nothing stays orphaned and a stale
  view of small differences never delays a hint. Both handing off and holding back are judged
  only on a view that has caught up with this worker's own takes (`last_take_ms`): its own
  load is counted now, the others' as of their last report, so in a burst each worker sees
  itself above a target the others seem far below, and all of them would decline the same
  hints until their next reports.
- **Join grace**: a session opened less than the join grace ago (`Load.joining`) is left out
  of the fleet that handing off reads (`hand_off`, `imbalanced`, `excess`), not of the one
  that taking reads: nobody hands a newcomer anything to balance, yet everyone's share counts
  it, so the others hold back and what comes (STARTs, orphans, a rolling deploy's leavers'
  connections) goes to it, in one move.
- **By load** (`by_load`, issue 27): the same rule on what connections cost instead of how
  many there are. A connection weighs `cost(rate)` = 1 + its messages a second /
  `MESSAGES_PER_CONNECTION`: holding one open costs as much as receiving that many messages a
  second. A worker's load is its count plus its smoothed rate over that (`Load.weight`);
  capacities stay counts, turned into load at the fleet's mean cost per connection. Handing
  off, a worker picks the connections whose moves best close its gap, and the worker each is
  meant for (`pick_hand_offs`): a move must bring it strictly closer to its level and leave
  that taker half a band below where it was, so two workers within a connection's cost of
  each other never trade it.
"""

import heapq
import math
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

import attrs

from domain.state import LEAVING_CAPACITY, WorkerSession

BAND_SHARE = 0.1  # of the level: the hysteresis band (at least one connection)
# By load: messages a second that cost as much as holding one connection open (a connection
# at 2 msg/s weighs 3, one at 200 msg/s weighs 201).
MESSAGES_PER_CONNECTION = 1.0
# The rate's smoothing: an exponentially weighted mean with this time constant (a change of
# rate is 63 % counted after it, 95 % after three): longer than the two views a handoff waits
# for, so a burst of a few seconds does not move connections, short enough that a feed that
# turned hot is balanced within a minute or two.
RATE_WINDOW_MS = 30_000
# A connection that costs at least this many times the fleet's mean is heavy (`heavy`).
HEAVY_COSTS = 2.0


@attrs.frozen
class Rate:
    """One connection's smoothed rate of messages received, and the sample it was taken at:
    `received`, the count of messages received so far, at `at_ms` (None: never sampled);
    `since_ms`, the first sample's instant (what the warm-up's mean spans)."""

    per_s: float = 0.0
    at_ms: int | None = None
    received: int = 0
    warm: bool = False  # measured over at least one interval (else `per_s` is no estimate)
    since_ms: int | None = None


def smoothed(
    rate: Rate, received: int, now_ms: int, window_ms: int = RATE_WINDOW_MS, first_ms: int = 0
) -> Rate:
    """The rate after a sample: `received` messages so far at `now_ms`. Until the samples
    span a window it is their plain mean (the first interval measured is taken as it is: a
    connection that just moved in counts at its rate at once, not from 0 up over the window);
    later intervals are weighted by 1 - exp(-elapsed / window). Weighted so from the first,
    one heartbeat's two or three messages stuck to a moved connection for a window: off by a
    third either way, each such error a share of a worker's load that balancing then chased
    (bench/RESULTS.md section 37). `first_ms`: the shortest first interval that is an
    estimate (one of a few milliseconds holds no message or one; until then, none)."""
    if rate.at_ms is None:
        return Rate(0.0, now_ms, received, since_ms=now_ms)
    elapsed = now_ms - rate.at_ms
    if elapsed <= 0 or (not rate.warm and elapsed < first_ms):
        return rate
    instant = 1000 * max(0, received - rate.received) / elapsed
    since = rate.at_ms if rate.since_ms is None else rate.since_ms
    # The running mean's weight for this interval (1 for the first) while it is the larger.
    alpha = max(1 - math.exp(-elapsed / window_ms), elapsed / (now_ms - since))
    per_s = rate.per_s + alpha * (instant - rate.per_s)
    return Rate(per_s, now_ms, received, warm=True, since_ms=since)


def cost(rate_per_s: float) -> float:
    """What one connection weighs, by load: 1 for holding it, plus its messages."""
    return 1.0 + rate_per_s / MESSAGES_PER_CONNECTION


def heavy(rate_per_s: float, mean_per_s: float) -> bool:
    """Whether a connection at `rate_per_s` is heavy in a fleet whose connections receive
    `mean_per_s` each on average: it costs `HEAVY_COSTS` times their mean cost or more. A
    heavy one's hand-off is left to the worker it was meant for (application/worker/balance.py
    `left_for_another`): taken by a worker at its level, it only moved the excess there. In a
    fleet of like connections none is, and a hand-off is any worker's hint."""
    return cost(rate_per_s) >= HEAVY_COSTS * cost(mean_per_s)


def mean_rate(loads: Sequence["Load"]) -> float:
    """The messages a second of the connections these sessions hold, per connection (0 if
    they hold none): what a connection of unknown cost is counted at, by load (a hint's, an
    orphan's, one not measured yet since its take)."""
    held = sum(x.held for x in loads)
    return sum(x.rate for x in loads) / held if held else 0.0


@attrs.define
class Load:
    """One live worker's load, as the rule reads it. Never changed once made (a changed one is
    made with attrs.evolve), yet not frozen: every worker makes one per live session at each
    look at the fleet, and a frozen attrs instance takes three times as long to make (at 1,000
    workers that was three quarters of the simulation's time: bench/RESULTS.md section 31)."""

    session_id: str
    held: int
    capacity: int
    reported_at_ms: int = 0
    rate: float = 0.0  # messages a second received over all its connections, smoothed
    # Its session opened within the join grace: nobody hands off to balance toward it yet
    # (`share_of`), while it takes its share of what comes (a deploy's leavers').
    joining: bool = False

    @property
    def leaving(self) -> bool:
        """Its worker is shutting down (`WorkerSession.leaving`): it takes nothing."""
        return self.capacity == LEAVING_CAPACITY

    @property
    def weight(self) -> float:
        """Its load, by load: the sum of its connections' costs."""
        return self.held + self.rate / MESSAGES_PER_CONNECTION


@attrs.frozen
class Share:
    """This worker's part of the fleet's load, and what it should do about it now."""

    level: float  # its even share, bounded by its capacity
    target: int  # the level in whole connections
    imbalanced: bool  # some worker is further than its band from its level
    hand_off: int  # connections to hand off now
    room: int  # connections it may take now
    # Connections of dead sessions it may take now: up to its target, counting them in
    # (placement: a dead worker's connections spread over the
    # survivors in one move).
    takeover_room: int = 0
    # How far above its target it is, in what is balanced (connections, or load), and its
    # band in the same units: what `pick_hand_offs` closes.
    excess: float = 0.0
    band: float = 1.0
    # By load: this worker's weight and the others' (weight, held, session id)
    # (`pick_hand_offs`).
    weight: float = 0.0
    others: tuple[tuple[float, int, str], ...] = ()


def band(level: float) -> float:
    """How far from its level a worker may be before anything moves."""
    return max(1.0, BAND_SHARE * level)


def loads_of(sessions: Sequence[WorkerSession], now_ms: int, join_grace_ms: int = 0) -> list[Load]:
    """The live sessions' loads as last reported. A leaving session (capacity 0) stays in the
    view with what it still holds and a capacity of 0: it takes nothing, and the others' levels
    are the split of everything, its connections included, among themselves."""
    return [
        Load(
            s.session_id,
            s.held,
            s.capacity,
            s.updated_at_ms,
            s.rate_milli / 1000,
            now_ms - s.opened_at_ms < join_grace_ms,
        )
        for s in sessions
        if s.is_live(now_ms)
    ]


def levels(loads: Sequence[Load], unplaced: int = 0) -> dict[str, float]:
    """Water filling: every worker gets min(capacity, L), with L such that they sum to the
    total held and `unplaced` (connections waiting for an owner), or everyone's capacity, if
    the fleet holds more than that."""
    held = {load.session_id: float(load.held) for load in loads}
    return _fill(held, {load.session_id: float(load.capacity) for load in loads}, unplaced)


def _fill(values: dict[str, float], caps: dict[str, float], extra: float) -> dict[str, float]:
    """Water filling of the sum of `values` and `extra` under the bounds `caps`."""
    remaining, left = sum(values.values()) + extra, len(values)
    level = 0.0
    # By distinct capacity, smallest first: a fleet's workers mostly share one, and every
    # take asks for a share (a sort of the whole fleet per ask was a tenth of the simulation's
    # time at 100 workers). The workers of one capacity below the level all hold it.
    for cap, n in sorted(Counter(caps.values()).items()):
        level = remaining / left
        if cap >= level:
            break
        remaining -= cap * n
        left -= n
    else:
        level = max(caps.values(), default=0.0)
    return {sid: min(caps[sid], level) for sid in values}


def targets(loads: Sequence[Load], unplaced: int = 0) -> dict[str, int]:
    """The levels in whole connections, summing to the total held and unplaced (within
    capacities): the largest whole level F that fits, plus one each for the remainder,
    heaviest first."""
    total = sum(load.held for load in loads) + unplaced
    cap_total = sum(load.capacity for load in loads)
    if total >= cap_total:
        return {load.session_id: load.capacity for load in loads}
    capacities = sorted(Counter(load.capacity for load in loads).items())  # (capacity, how many)
    low, high = 0, capacities[-1][0]
    while low < high:  # the largest F with sum(min(cap, F)) <= total
        mid = (low + high + 1) // 2
        if sum(n * min(cap, mid) for cap, n in capacities) <= total:
            low = mid
        else:
            high = mid - 1
    result = {load.session_id: min(load.capacity, low) for load in loads}
    extra = total - sum(result.values())
    if extra > 0:
        # The heaviest `extra` of those below their capacity (fewer than the fleet: not a
        # sort of all of it).
        below = [load for load in loads if result[load.session_id] < load.capacity]
        for load in heapq.nsmallest(extra, below, key=lambda x: (-x.held, x.session_id)):
            result[load.session_id] += 1
    return result


def share_of(
    loads: Sequence[Load],
    me: Load,
    *,
    max_hand_offs: int,
    settle_after_ms: int = 0,
    last_take_ms: int = 0,
    unplaced: int = 0,
    by_load: bool = False,
) -> Share:
    """`loads`: the live sessions as last reported (this worker's own entry, if there, is
    replaced by `me`, which is what it holds now). `settle_after_ms`: no handoff until every
    other worker reported its load at or after this instant (see docs/decisions.md).
    `last_take_ms`: when this worker last took a connection; until every other worker has
    reported after it, the view may miss what the others took meanwhile, so it neither holds
    taking back nor asks for a handoff. `unplaced`: connections of dead sessions not yet
    taken, counted into the split: `takeover_room` is this worker's part of them. `by_load`:
    balance what the connections cost (`Load.weight`), not how many (`_share_by_load`). The
    loads that are `joining` count for taking only (`joined`)."""
    if max_hand_offs < 0:
        raise ValueError(f"max_hand_offs must not be negative, got {max_hand_offs}")
    fleet = [load for load in loads if load.session_id != me.session_id] + [me]
    rule = _share_by_load if by_load else _share_by_count
    asks = (max_hand_offs, settle_after_ms, last_take_ms, unplaced)
    share = rule(fleet, me, *asks)
    # Handing off reads the fleet without the sessions in their join grace; taking reads it
    # all, so the others hold back for a newcomer and what comes goes to it.
    if len(settled := [x for x in fleet if not x.joining or x is me]) < len(fleet):
        share = joined(share, rule(settled, me, *asks))
    return share


def joined(share: Share, settled: Share) -> Share:
    """`share`, its handing off as `settled` (the share in the fleet without the sessions
    still in their join grace) has it."""
    return attrs.evolve(
        share,
        imbalanced=settled.imbalanced,
        hand_off=settled.hand_off,
        excess=settled.excess,
        band=settled.band,
        weight=settled.weight,
        others=settled.others,
    )


def _share_by_count(
    fleet: Sequence[Load],
    me: Load,
    max_hand_offs: int,
    settle_after_ms: int,
    last_take_ms: int,
    unplaced: int,
) -> Share:
    level = levels(fleet, unplaced)
    target = targets(fleet, unplaced)
    imbalanced = any(abs(x.held - level[x.session_id]) > band(level[x.session_id]) for x in fleet)
    others = [x for x in fleet if x.session_id != me.session_id]
    settled = all(x.reported_at_ms >= settle_after_ms for x in others)
    caught_up = all(x.reported_at_ms >= last_take_ms for x in others)
    mine = target[me.session_id]
    hand_off = 0
    if imbalanced and settled and caught_up and me.held > mine:
        hand_off = min(me.held - mine, max_hand_offs)
    free = max(0, me.capacity - me.held)
    short = any(level[x.session_id] - x.held > band(level[x.session_id]) for x in fleet)
    held_back = caught_up and (short or (imbalanced and me.held > mine))
    room = min(free, max(0, mine - me.held)) if held_back else free
    # Up to its exact target, not the top of its band: the targets of one view add up to the
    # dead's connections, while each survivor taking up to the top of its band (a tenth over
    # its level) leaves the last ones to take theirs short of their band, and balancing then
    # moves connections a second time (the simulation at 100 workers: the parts ended between
    # 125 and 164 around a level of 149). One a view misses waits for the grace.
    takeover_room = min(free, unplaced, max(0, mine - me.held))
    return Share(
        level[me.session_id],
        mine,
        imbalanced,
        hand_off,
        room,
        takeover_room,
        excess=float(me.held - mine),
        band=band(level[me.session_id]),
    )


def _share_by_load(
    fleet: Sequence[Load],
    me: Load,
    max_hand_offs: int,
    settle_after_ms: int,
    last_take_ms: int,
    unplaced: int,
) -> Share:
    """`share_of` on load. The level is the water filling of the weights; a worker's capacity
    is its weight plus its free connections at the fleet's mean cost (`unit`), and connections
    of unknown cost (the unplaced, a hint's) count at that mean too: room is the shortfall in
    such connections, rounded (up for the dead's, so that the parts cover them all)."""
    unit = cost(mean_rate(fleet))
    weights = {x.session_id: x.weight for x in fleet}
    # A leaving worker (capacity 0) is bounded at nothing, as by count: its load is split.
    caps = {
        x.session_id: 0.0 if x.leaving else x.weight + max(0, x.capacity - x.held) * unit
        for x in fleet
    }
    level = _fill(weights, caps, unplaced * unit)

    def band_of(sid: str) -> float:
        return max(unit, BAND_SHARE * level[sid])

    sid = me.session_id
    imbalanced = any(abs(weights[x] - level[x]) > band_of(x) for x in weights)
    others = [x for x in fleet if x.session_id != sid]
    settled = all(x.reported_at_ms >= settle_after_ms for x in others)
    caught_up = all(x.reported_at_ms >= last_take_ms for x in others)
    excess = weights[sid] - level[sid]
    hand_off = 0
    if imbalanced and settled and caught_up and excess > 0:
        hand_off = min(me.held, max_hand_offs)
    free = max(0, me.capacity - me.held)
    short = any(level[x] - weights[x] > band_of(x) for x in weights)
    held_back = caught_up and (short or (imbalanced and excess > 0))
    wanted = max(0, round(-excess / unit))
    room = min(free, wanted) if held_back else free
    takeover_room = min(free, unplaced, max(0, math.ceil(-excess / unit - 1e-9)))
    target = me.held + wanted if excess <= 0 else me.held
    return Share(
        level[sid],
        target,
        imbalanced,
        hand_off,
        room,
        takeover_room,
        excess=excess,
        band=band_of(sid),
        weight=weights[sid],
        # The takers a hand-off may be meant for: not the leaving, nor the full.
        others=tuple(
            (x.weight, x.held, x.session_id)
            for x in others
            if not x.leaving and x.held < x.capacity
        ),
    )


def pick_hand_offs(
    costs: Sequence[tuple[str, float]], share: Share, count: int
) -> list[tuple[str, str]]:
    """Which connections to hand off, by load, and the session each is meant for: the fewest
    moves that close `share.excess` (how far above its level this worker is), the most costly
    first, each to the lightest other worker as the moves before it left them. A move must
    bring this worker strictly closer to its level (a cost under twice what is left) and
    leave that taker below where this worker was by half a band at least (a cost under the
    gap between them less that), so the fleet's spread shrinks with every move and two
    workers within a connection's cost of each other never trade it. `costs` in the order
    to prefer among equals.

    **Meant for.** The hint names that taker (`HintOrigin.to`), which takes it by capacity
    if it polls first; the others take it by their share. Taken by whoever polled first, a hot
    feed went to a worker already at its level, which then handed off its own hot one, and
    four hot feeds on four workers passed from one to the next for minutes
    (tests/unit/test_worker_balance_load.py). Left to the named one alone for a heartbeat,
    at 100 workers the others received it and gave it back until that one did.

    **A swap.** A worker beyond its band that can move nothing so (it holds two hot feeds,
    each heavier than twice its excess) hands off its lightest heavy one to the other worker
    holding the lightest connections if they are light (a mean cost under half of it) and
    worth at least half of it: that taker is then above its level by light connections, which it
    hands off in turn (the heavy one it just took is held: `MOVED_HOLD_LEASES`), and both end
    near the level. Without light connections to give back the move would only pass the
    excess on, so none is made."""
    takers = list(share.others)
    if not takers:
        return []
    loads = [(weight, sid) for weight, _, sid in takers]
    heapq.heapify(loads)
    order = sorted(range(len(costs)), key=lambda i: -costs[i][1])
    left, mine = share.excess, share.weight
    chosen: list[tuple[str, str]] = []
    for i in order:
        if len(chosen) >= count or left <= 0:
            break
        connection_id, c = costs[i]
        lightest, to = loads[0]
        # The taker ends half a band below where this worker was: a hot feed moved onto a
        # worker as far below its level as the giver was above only moved the excess there,
        # which it then handed on (the chaos soak by load: 33 and 12 became 12 and 33).
        if c < 2 * left and lightest + c < mine - share.band / 2:
            chosen.append((connection_id, to))
            left -= c
            mine -= c
            heapq.heapreplace(loads, (lightest + c, to))
    if chosen or share.excess <= share.band or count <= 0:
        return chosen
    heavy = [(c, cid) for cid, c in costs if c >= 2 * share.excess]
    if len(heavy) < 2:
        # One heavy feed is this worker's fair part of them; what keeps it above its band
        # is light connections held since they moved in (`MOVED_HOLD_LEASES`): it waits
        # for them. Swapped away, the heavy one went to a worker that then stood where this
        # one did.
        return []
    c, connection_id = min(heavy)
    # The taker holding the lightest connections (the lowest mean cost), not the lightest
    # worker: one that holds a heavy feed besides light ones would hand that one off in turn
    # (it did not just move in), back to this worker, and the two traded heavy feeds for
    # minutes (tests/unit/test_worker_balance_load.py).
    light = [(weight / held, weight, to) for weight, held, to in takers if held > 0]
    if not light:
        return []
    mean, weight, to = min(light)
    return [(connection_id, to)] if mean < c / 2 and weight >= c / 2 else []


def place_heavy(
    rates: Sequence[tuple[str, float]],
    takers: Sequence[tuple[float, int, str]],
    mean_per_s: float,
) -> dict[str, str]:
    """By load, where a leaving worker's heavy connections go (`heavy`, in a fleet whose
    connections receive `mean_per_s` each; `rates`: all its connections, (id, messages a
    second)): each, the most costly first, to the taker (weight, held, session id) whose
    connections are lightest (the lowest mean cost) of those below the level that the takers
    and everything the leaver holds make. Its hint names that taker (`HintOrigin.to`):
    counted at the fleet's mean by whoever polled first, a leaver's hot stream went to a
    worker near its level, which then handed it on (the skewed chaos soak: 2 of 68 SIGTERMed
    connections moved twice). Not simply the lightest taker: one holding a hot feed and few
    quiet ones, placed another, had nothing to give back but the quiet ones it had just
    taken, and handed those on (tests/unit/test_worker_balance_load.py); one of many quiet
    connections gives back what it held before. The light ones are anyone's by share: named
    too, a 100-worker deploy's hints waited for their one taker (bench/RESULTS.md section
    37)."""
    if not takers:
        return {}
    loads = {sid: (weight, held) for weight, held, sid in takers}
    level = (sum(w for w, _ in loads.values()) + sum(cost(r) for _, r in rates)) / len(loads)
    placed: dict[str, str] = {}
    for connection_id, rate in sorted(rates, key=lambda x: -x[1]):
        if not heavy(rate, mean_per_s):
            break
        # Never empty: what is placed so far is less than all the leaver holds, so the takers
        # weigh less than the level times their number, and one is below it.
        below = [(h and w / h, sid) for sid, (w, h) in loads.items() if w < level]
        sid = min(below)[1]
        weight, held = loads[sid]
        loads[sid] = (weight + cost(rate), held + 1)
        placed[connection_id] = sid
    return placed


def _spread(connection_id: str) -> int:
    """A hash every worker computes alike (Python's own `hash` of a str differs per process)."""
    return zlib.crc32(connection_id.encode())


def tended_by(dead: Iterable[str], live: Collection[str]) -> dict[str, str]:
    """The one session of `live` that sees to each `dead` session's leftovers (its expiry's
    record, its STOPPED connections, its item once nothing names it); none while none lives.
    A hash of the dead id picks a slot of the sorted live sessions, as `take_order` does, so
    workers that read the same sessions agree and the dead spread over the living. Every
    survivor seeing to every dead session was an AZ loss's workers x deaths reads a scan: at
    1,000 workers, half of each survivor's requests (bench/RESULTS.md section 33)."""
    ring = sorted(live)
    if not ring:
        return {}
    return {sid: ring[_spread(sid) % len(ring)] for sid in dead}


def take_order(connection_ids: Sequence[str], me: str, live: Collection[str]) -> list[str]:
    """The order in which worker `me` tries orphans that every live worker in `live` sees
    too, so that they try different ones first: each connection falls to one slot of the
    sorted live sessions by a hash; `me` tries its own slot's first, then the next slot's,
    and so on round the ring, each other slot from its far end (that slot's own worker takes
    it from the near end). Workers that read the same sessions agree on the slots, so taking
    their parts they meet in the same orphan only where a part overflows its slot; taken in
    independent random orders, a try near the end of the takes mostly loses to another
    worker's take of the same orphan, and each lost try is store reads for nothing."""
    ring = sorted({*live, me})
    mine = ring.index(me)
    size = len(ring)

    def key(cid: str) -> tuple[int, int]:
        spread = _spread(cid)
        distance = (spread % size - mine) % size
        within = spread // size
        return distance, within if distance == 0 else -within

    return sorted(connection_ids, key=key)
