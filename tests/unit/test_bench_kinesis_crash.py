"""The kinesis-crash bench's verdict over a demo summary: only the killed worker's connections
are held to the replay bound, and a copy past it is reported, not hidden."""

from typing import Any

from bench.kinesis_crash import _judged


def _summary(copies: dict[str, int]) -> dict[str, Any]:
    return {
        "ok": True,
        "violations": [],
        "totals": {"emitted": 1000, "lost": 0},
        "takeover": {"crash": {"median_ms": 120}},
        "moves": [
            {"kind": "crash", "connection_ids": ["a", "b"]},
            {"kind": "handoff", "connection_ids": ["c"]},
        ],
        "connections": [
            {"connection_id": cid, "duplicated": n, "copies_beyond_replay": 0}
            for cid, n in copies.items()
        ],
    }


def test_the_killed_workers_connections_are_held_to_interval_plus_flush() -> None:
    judged = _judged(_summary({"a": 310, "b": 20, "c": 0}), 100.0, 3.0, 0.2)
    assert judged["affected"] == 2
    assert judged["copies"] == [20, 310]
    assert judged["rate_x_interval"] == 300.0
    assert judged["bound"] == 320.0
    assert judged["within_bound"]


def test_a_connection_past_the_bound_is_reported() -> None:
    judged = _judged(_summary({"a": 321, "b": 20, "c": 5}), 100.0, 3.0, 0.2)
    assert not judged["within_bound"]
    assert judged["copies_elsewhere"] == 5
