"""What the fleet bench and the chaos summary read off the simulator's records after a fault
(entrypoints/devstack/records.py): moves per connection, and when each settled with the owner
it kept (issue 27: a second move is a second gap, and the settled time counts it)."""

from entrypoints.devstack.records import moves_per_fault, settled_per_fault


def _record(*connected_at_ms: int) -> dict[str, object]:
    return {
        "connections": [{"connected_at_ms": t, "disconnected_at_ms": None} for t in connected_at_ms]
    }


FAULTS = [
    {"kind": "handoff", "at_ms": 1_000, "connections": ["a", "b", "c"]},
    {"kind": "stop", "at_ms": 5_000, "connections": ["a"]},
]
STREAMS = {
    "a": _record(0, 1_300),  # moved once, 0.3 s after the fault
    "b": _record(0, 1_200, 2_900),  # moved, then balancing moved it again
    "c": _record(0, 6_000),  # subscribed to again only after the next fault: not this one's
}


def test_a_second_move_is_counted_and_settles_the_connection_at_it() -> None:
    assert moves_per_fault(FAULTS, STREAMS, 10_000, ("handoff",)) == {
        "handoff": {"moved": 3, "moved_twice": 1, "most": 2}
    }
    assert settled_per_fault(FAULTS, STREAMS, 10_000, ("handoff",)) == {"handoff": [0.3, 1.9]}


def test_a_fault_window_ends_where_its_moves_until_says() -> None:
    faults = [{**FAULTS[0], "moves_until_ms": 2_000}]
    assert settled_per_fault(faults, STREAMS, 10_000, ("handoff",)) == {"handoff": [0.3, 0.2]}
    assert settled_per_fault(faults, STREAMS, 10_000, ("crash",)) == {}
