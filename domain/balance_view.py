"""`share_of` (domain/balance.py) for one view of the fleet, asked again and again.

A worker asks for its share at every take and every poll, and its view changes only when it
reads the sessions again: in between only its own load moves. `share_of` walks the whole fleet
per ask (levels, targets, the bands); `FleetView` walks the others once per view, keeping
per capacity how many there are, the least and most held and, when first needed, their
order by load, and answers each ask from those in time that does not grow with the fleet.
The answers are `share_of`'s, to the bit (tests/unit/test_domain_balance_view.py holds them
equal on random fleets): the same sums in the same float operations, each group's extremes
standing for the `any` over its members (a level's distance from a load is monotone in the
load), a rank for the remainder's `nsmallest`. By load it is `share_of` itself.

Its walk per view is a few passes that make nothing per worker, where share_of's per ask made
four dicts of the fleet, a count of its capacities and a partial sort: share_of was 36 % of
the simulation's time in the start-up of 300 workers x 30,000 connections (bench/RESULTS.md
section 31)."""

import bisect
from collections import Counter
from collections.abc import Sequence

from domain.balance import Load, Share, band, joined, share_of


class _Group:
    """The other workers of one capacity: how many, the least and most held, and (built on
    first need) their (-held, session id) in order: `targets`' order for the remainder."""

    __slots__ = ("capacity", "high", "low", "members", "n", "order")

    def __init__(self, capacity: int, members: list[Load], helds: list[int]) -> None:
        self.capacity = capacity
        self.members = members
        self.n = len(members)
        self.low = min(helds)
        self.high = max(helds)
        self.order: list[tuple[int, str]] | None = None

    def ahead_of(self, me: Load) -> int:
        """How many of them `targets` gives the remainder before `me` (heavier, or as heavy
        with a smaller session id)."""
        if self.order is None:
            self.order = sorted((-x.held, x.session_id) for x in self.members)
        return bisect.bisect_left(self.order, (-me.held, me.session_id))


class FleetView:
    """The loads of one view, seen by the worker `me_id`: `share` is
    `share_of(loads, me, ...)` for any `me` of that session id. The loads name each session
    once, as a store's listing does (share_of keys its levels and targets by session id)."""

    def __init__(self, loads: Sequence[Load], me_id: str) -> None:
        self._loads = loads
        self.me_id = me_id
        others = [x for x in loads if x.session_id != me_id]
        helds = [x.held for x in others]
        capacities = [x.capacity for x in others]
        if len(set(capacities)) <= 1:  # a fleet's workers mostly share one: no grouping
            self._groups = [_Group(capacities[0], others, helds)] if others else []
        else:
            by_capacity: dict[int, tuple[list[Load], list[int]]] = {}
            for x in others:
                members, held = by_capacity.setdefault(x.capacity, ([], []))
                members.append(x)
                held.append(x.held)
            self._groups = [_Group(cap, *group) for cap, group in sorted(by_capacity.items())]
        self._held = sum(helds)
        self._capacity = sum(capacities)
        self._n = len(others)
        self._reported = min([x.reported_at_ms for x in others], default=None)
        # Without the sessions in their join grace: what handing off reads (`share_of`).
        self._settled = (
            FleetView([x for x in loads if not x.joining or x.session_id == me_id], me_id)
            if any(x.joining for x in others)
            else None
        )

    def share(
        self,
        me: Load,
        *,
        max_hand_offs: int,
        settle_after_ms: int = 0,
        last_take_ms: int = 0,
        unplaced: int = 0,
        by_load: bool = False,
    ) -> Share:
        """`share_of(loads, me, ...)` (see there)."""
        if by_load or me.session_id != self.me_id:
            return share_of(
                self._loads,
                me,
                max_hand_offs=max_hand_offs,
                settle_after_ms=settle_after_ms,
                last_take_ms=last_take_ms,
                unplaced=unplaced,
                by_load=by_load,
            )
        if max_hand_offs < 0:
            raise ValueError(f"max_hand_offs must not be negative, got {max_hand_offs}")
        level = self._level(me, unplaced)
        mine = self._target(me, unplaced)
        mine_level = min(float(me.capacity), level)
        imbalanced = abs(me.held - mine_level) > band(mine_level)
        short = mine_level - me.held > band(mine_level)
        for group in self._groups:
            at = min(float(group.capacity), level)
            width = band(at)
            imbalanced = imbalanced or group.high - at > width or at - group.low > width
            short = short or at - group.low > width
        settled = self._reported is None or self._reported >= settle_after_ms
        caught_up = self._reported is None or self._reported >= last_take_ms
        hand_off = 0
        if imbalanced and settled and caught_up and me.held > mine:
            hand_off = min(me.held - mine, max_hand_offs)
        free = max(0, me.capacity - me.held)
        held_back = caught_up and (short or (imbalanced and me.held > mine))
        room = min(free, max(0, mine - me.held)) if held_back else free
        takeover_room = min(free, unplaced, max(0, mine - me.held))
        share = Share(
            mine_level,
            mine,
            imbalanced,
            hand_off,
            room,
            takeover_room,
            excess=float(me.held - mine),
            band=band(mine_level),
        )
        if self._settled is None:
            return share
        return joined(
            share,
            self._settled.share(
                me,
                max_hand_offs=max_hand_offs,
                settle_after_ms=settle_after_ms,
                last_take_ms=last_take_ms,
                unplaced=unplaced,
            ),
        )

    def _counts(self, me: Load) -> list[tuple[int, int]]:
        """(capacity, how many) of the whole fleet, `me` in, smallest capacity first."""
        counts = Counter({group.capacity: group.n for group in self._groups})
        counts[me.capacity] += 1
        return sorted(counts.items())

    def _level(self, me: Load, unplaced: int) -> float:
        """`levels`' water level (domain/balance.py `_fill`, the same float operations)."""
        remaining = float(self._held + me.held) + unplaced
        left = self._n + 1
        counts = self._counts(me)
        for cap, n in counts:
            level = remaining / left
            if float(cap) >= level:
                return level
            remaining -= float(cap) * n
            left -= n
        return float(counts[-1][0])

    def _target(self, me: Load, unplaced: int) -> int:
        """`targets(...)[me.session_id]`."""
        total = self._held + me.held + unplaced
        if total >= self._capacity + me.capacity:
            return me.capacity
        counts = self._counts(me)
        low, high = 0, counts[-1][0]
        while low < high:
            mid = (low + high + 1) // 2
            if sum(n * min(cap, mid) for cap, n in counts) <= total:
                low = mid
            else:
                high = mid - 1
        mine = min(me.capacity, low)
        extra = total - sum(n * min(cap, low) for cap, n in counts)
        if extra > 0 and mine < me.capacity:
            ahead = sum(g.ahead_of(me) for g in self._groups if g.capacity > low)
            mine += ahead < extra
        return mine
