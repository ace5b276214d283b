"""FleetView (domain/balance_view.py) answers as share_of does, for any load of the asking
worker on one view of the others: it is a cache, never a second rule."""

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.balance import Load, Share, share_of
from domain.balance_view import FleetView

CAPACITIES = st.sampled_from([0, 1, 3, 10, 50, 100, 120])


@attrs.frozen
class Ask:
    max_hand_offs: int
    settle_after_ms: int
    last_take_ms: int
    unplaced: int

    def of_view(self, fleet: FleetView, me: Load) -> Share:
        return fleet.share(
            me,
            max_hand_offs=self.max_hand_offs,
            settle_after_ms=self.settle_after_ms,
            last_take_ms=self.last_take_ms,
            unplaced=self.unplaced,
        )

    def of_share_of(self, loads: list[Load], me: Load) -> Share:
        return share_of(
            loads,
            me,
            max_hand_offs=self.max_hand_offs,
            settle_after_ms=self.settle_after_ms,
            last_take_ms=self.last_take_ms,
            unplaced=self.unplaced,
        )


@st.composite
def views(draw: st.DrawFn) -> tuple[list[Load], Load, Ask]:
    """Others of a few capacities (a fleet mostly shares one), the asking worker (in the view
    or not, as a worker's own entry is), and the ask's arguments."""
    n = draw(st.integers(0, 14))
    others = [
        Load(
            f"w{i:02d}",
            draw(st.integers(0, 130)),
            draw(CAPACITIES),
            reported_at_ms=draw(st.integers(0, 10)),
            joining=draw(st.booleans()) and draw(st.booleans()),  # in its join grace
        )
        for i in range(n)
    ]
    me = Load(
        draw(st.sampled_from(["w00", "w05", "m", "w99"])),
        draw(st.integers(0, 130)),
        draw(CAPACITIES),
        reported_at_ms=draw(st.integers(0, 10)),
    )
    loads = others if draw(st.booleans()) else [*others, me]
    ask = Ask(
        draw(st.integers(0, 20)),
        draw(st.integers(0, 11)),
        draw(st.integers(0, 11)),
        draw(st.integers(0, 400)),
    )
    return loads, me, ask


@settings(max_examples=1_000, deadline=None)
@given(views())
def test_the_view_answers_as_share_of(view: tuple[list[Load], Load, Ask]) -> None:
    loads, me, ask = view
    assert ask.of_view(FleetView(loads, me.session_id), me) == ask.of_share_of(loads, me)


@settings(max_examples=300, deadline=None)
@given(views(), st.lists(st.integers(0, 130), min_size=1, max_size=6))
def test_one_view_answers_every_load_of_its_worker(
    view: tuple[list[Load], Load, Ask], helds: list[int]
) -> None:
    # One view, asked as the worker takes and hands off: its own load moves, the others' not.
    loads, me, ask = view
    fleet = FleetView(loads, me.session_id)
    for held in helds:
        mine = Load(me.session_id, held, me.capacity, me.reported_at_ms)
        assert ask.of_view(fleet, mine) == ask.of_share_of(loads, mine)


def test_by_load_and_another_worker_are_share_of_itself() -> None:
    loads = [Load("a", 10, 100, rate=50.0), Load("b", 90, 100, rate=1.0)]
    me = Load("a", 12, 100, rate=60.0)
    fleet = FleetView(loads, "a")
    assert fleet.share(me, max_hand_offs=5, by_load=True) == share_of(
        loads, me, max_hand_offs=5, by_load=True
    )
    other = Load("b", 80, 100)
    assert fleet.share(other, max_hand_offs=5) == share_of(loads, other, max_hand_offs=5)


def test_a_negative_handoff_bound_is_refused_as_share_of_refuses_it() -> None:
    with pytest.raises(ValueError, match="max_hand_offs"):
        FleetView([Load("a", 1, 10)], "a").share(Load("a", 1, 10), max_hand_offs=-1)
