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
"""

import zlib
from collections.abc import Collection, Sequence

import attrs

from domain.state import WorkerSession

BAND_SHARE = 0.1  # of the level: the hysteresis band (at least one connection)


@attrs.frozen
class Load:
    """One live worker's load, as the rule reads it."""

    session_id: str
    held: int
    capacity: int
    reported_at_ms: int = 0


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


def band(level: float) -> float:
    """How far from its level a worker may be before anything moves."""
    return max(1.0, BAND_SHARE * level)


def loads_of(sessions: Sequence[WorkerSession], now_ms: int) -> list[Load]:
    """The live sessions' loads as last reported. A capacity of 0 (never reported) counts as
    what the session holds: it is given nothing more and asked for nothing."""
    return [
        Load(s.session_id, s.held, s.capacity if s.capacity > 0 else s.held, s.updated_at_ms)
        for s in sessions
        if s.is_live(now_ms)
    ]


def levels(loads: Sequence[Load], unplaced: int = 0) -> dict[str, float]:
    """Water filling: every worker gets min(capacity, L), with L such that they sum to the
    total held and `unplaced` (connections waiting for an owner), or everyone's capacity, if
    the fleet holds more than that."""
    total = sum(load.held for load in loads) + unplaced
    remaining, left = float(total), len(loads)
    level = 0.0
    for load in sorted(loads, key=lambda x: x.capacity):
        level = remaining / left
        if load.capacity >= level:
            break
        remaining -= load.capacity
        left -= 1
    else:
        level = max((load.capacity for load in loads), default=0)
    return {load.session_id: float(min(load.capacity, level)) for load in loads}


def targets(loads: Sequence[Load], unplaced: int = 0) -> dict[str, int]:
    """The levels in whole connections, summing to the total held and unplaced (within
    capacities): the largest whole level F that fits, plus one each for the remainder,
    heaviest first."""
    total = sum(load.held for load in loads) + unplaced
    cap_total = sum(load.capacity for load in loads)
    if total >= cap_total:
        return {load.session_id: load.capacity for load in loads}
    low, high = 0, max(load.capacity for load in loads)
    while low < high:  # the largest F with sum(min(cap, F)) <= total
        mid = (low + high + 1) // 2
        if sum(min(load.capacity, mid) for load in loads) <= total:
            low = mid
        else:
            high = mid - 1
    result = {load.session_id: min(load.capacity, low) for load in loads}
    extra = total - sum(result.values())
    for load in sorted(loads, key=lambda x: (-x.held, x.session_id)):
        if extra <= 0:
            break
        if result[load.session_id] < load.capacity:
            result[load.session_id] += 1
            extra -= 1
    return result


def share_of(
    loads: Sequence[Load],
    me: Load,
    *,
    max_hand_offs: int,
    settle_after_ms: int = 0,
    last_take_ms: int = 0,
    unplaced: int = 0,
) -> Share:
    """`loads`: the live sessions as last reported (this worker's own entry, if there, is
    replaced by `me`, which is what it holds now). `settle_after_ms`: no handoff until every
    other worker reported its load at or after this instant (see docs/decisions.md).
    `last_take_ms`: when this worker last took a connection; until every other worker has
    reported after it, the view may miss what the others took meanwhile, so it neither holds
    taking back nor asks for a handoff. `unplaced`: connections of dead sessions not yet
    taken, counted into the split: `takeover_room` is this worker's part of them."""
    if max_hand_offs < 0:
        raise ValueError(f"max_hand_offs must not be negative, got {max_hand_offs}")
    fleet = [load for load in loads if load.session_id != me.session_id] + [me]
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
    return Share(level[me.session_id], mine, imbalanced, hand_off, room, takeover_room)


def _spread(connection_id: str) -> int:
    """A hash every worker computes alike (Python's own `hash` of a str differs per process)."""
    return zlib.crc32(connection_id.encode())


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
