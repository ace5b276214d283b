"""The dev stack's judge (entrypoints/devstack/judge.py): one stream's facts from what the
upstream sent, the final checkpoint and what the sink holds."""

from typing import Any

from entrypoints.devstack.judge import judge_stream


def record(emitted: int, sent: int, ranges: list[tuple[int, int, int, int | None]]) -> Any:
    """`ranges`: (first_seq, last_seq, connected_at_ms, disconnected_at_ms) per subscriber."""
    connections = [
        {"first_seq": f, "last_seq": last, "connected_at_ms": a, "disconnected_at_ms": b}
        for f, last, a, b in ranges
    ]
    return {
        "emitted": emitted,
        "sent": sent,
        "peak_subscribers": 2,
        "connects": len(connections),
        "connections": connections,
    }


def test_a_stream_stored_whole_once_has_nothing_lost_missing_or_duplicated() -> None:
    facts = judge_stream("c", record(5, 5, [(1, 5, 0, 100)]), 5, [1, 2, 3, 4, 5], ended_ms=100)
    assert (facts.lost, facts.duplicated, facts.beyond_emitted) == (0, 0, 0)
    assert facts.missing_below_checkpoint == ()
    assert facts.past_checkpoint_contiguous
    assert (facts.resent, facts.redelivered, facts.overlap_ms) == (0, 0, 0)


def test_each_broken_promise_shows_in_its_own_fact() -> None:
    # Two subscribers overlapping for 20 ms, the second resumed from 3 (3 and 4 sent twice);
    # the sink lost 2, holds 4 twice, and holds 9, which was never emitted.
    sent = record(6, 8, [(1, 4, 0, 50), (3, 6, 30, None)])
    facts = judge_stream("c", sent, 4, [1, 3, 4, 4, 5, 9], ended_ms=100)
    assert facts.lost == 2  # 2 and 6 of 1..6
    assert facts.missing_below_checkpoint == (2,)
    assert facts.duplicated == 1
    assert facts.beyond_emitted == 1
    assert facts.beyond_checkpoint == (5, 9)
    assert not facts.past_checkpoint_contiguous
    assert (facts.resent, facts.redelivered, facts.overlap_ms) == (2, 2, 20)
    assert (facts.stored, facts.peak_subscribers, facts.connects) == (5, 2, 2)


def test_without_a_record_only_the_sink_and_the_checkpoint_are_judged() -> None:
    facts = judge_stream("c", None, 3, [1, 2, 3, 4])
    assert (facts.emitted, facts.lost, facts.beyond_emitted) == (0, 0, 4)
    assert facts.missing_below_checkpoint == ()
    assert facts.beyond_checkpoint == (4,)
    assert facts.past_checkpoint_contiguous


def test_the_checkpoint_itself_missing_is_a_gap() -> None:
    assert judge_stream("c", None, 3, [1, 2]).missing_below_checkpoint == (3,)
