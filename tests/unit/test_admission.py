"""The admission rules (application/worker/admission.py), without sockets or an event loop:
one test per row of docs/decisions.md's table "What an upstream may send"."""

import pytest

from application.ports import UpstreamMessage
from application.ports.metrics import MESSAGES_REJECTED, SEQ_CONFLICTS, SEQ_JUMPS
from application.ports.sink import MAX_SEQ
from application.worker.admission import RECENT, Admission, AdmissionPolicy, Fault, Verdict

POLICY = AdmissionPolicy(seq_jump_window=1_000_000, max_message_bytes=64)


def admission(resume_checkpoint: int = 0) -> Admission:
    return Admission(resume_checkpoint, POLICY)


def feed(adm: Admission, *messages: tuple[int | None, str]) -> list[Verdict]:
    return [adm.receive(UpstreamMessage(seq, data)) for seq, data in messages]


def stream(first: int, last: int) -> list[tuple[int | None, str]]:
    return [(n, f"m{n}") for n in range(first, last + 1)]


def accepted(verdicts: list[Verdict]) -> list[int]:
    return [seq for v in verdicts for seq, _ in v.accept]


def test_the_next_seq_is_stored() -> None:
    adm = admission()

    verdicts = feed(adm, *stream(1, 3))

    assert verdicts == [Verdict(accept=((n, f"m{n}"),)) for n in (1, 2, 3)]
    assert adm.next_seq == 4


def test_a_gap_is_held_until_a_later_seq_confirms_it_then_counted_lost() -> None:
    adm = admission()
    feed(adm, *stream(1, 3))

    held = adm.receive(UpstreamMessage(10, "m10"))
    assert held == Verdict()
    assert (adm.holding_ahead, adm.next_seq) == (10, 4)  # nothing past the gap passed on

    confirmed = adm.receive(UpstreamMessage(11, "m11"))
    assert confirmed == Verdict(accept=((10, "m10"), (11, "m11")), skipped=(4, 9))
    assert adm.next_seq == 12


def test_a_gap_right_after_a_confirmed_gap_is_held_in_turn() -> None:
    adm = admission()
    feed(adm, *stream(1, 3), (10, "m10"))

    verdict = adm.receive(UpstreamMessage(20, "m20"))

    assert verdict == Verdict(accept=((10, "m10"),), skipped=(4, 9))
    assert adm.holding_ahead == 20


def test_a_seq_inside_a_held_gap_is_a_jump_not_followed_and_nothing_past_the_gap_is_stored() -> (
    None
):
    """The bogus jump: 1, 2, 3, then 900004 (inside the window), then the real 4, 5, 6."""
    adm = admission()
    feed(adm, *stream(1, 3), (900_004, "bogus"))

    verdict = adm.receive(UpstreamMessage(4, "m4"))

    assert verdict.accept == ()
    assert verdict.fault == Fault(
        "seq 4 after the stream jumped from 3 to 900004: the jump is not followed", SEQ_JUMPS
    )
    assert (adm.next_seq, adm.holding_ahead) == (4, None)  # the next owner asks for 4 again


def test_a_skipped_seq_arriving_after_the_gap_was_confirmed_is_a_fault() -> None:
    adm = admission()
    feed(adm, *stream(1, 3), (10, "m10"), (11, "m11"))

    verdict = adm.receive(UpstreamMessage(5, "m5"))

    assert verdict.fault == Fault(
        "seq 5 arrived after the stream had skipped seqs 4..9 (counted lost upstream)", SEQ_JUMPS
    )


def test_the_held_message_sent_again_the_same_is_a_replay_and_with_other_data_a_conflict() -> None:
    adm = admission()
    feed(adm, *stream(1, 3), (10, "m10"))

    assert adm.receive(UpstreamMessage(10, "m10")) == Verdict(replay=True)
    assert adm.receive(UpstreamMessage(10, "other")).fault == Fault(
        "seq 10 sent again with other data than this session received", SEQ_CONFLICTS
    )


def test_a_seq_received_in_this_session_again_with_the_same_data_is_a_replay() -> None:
    adm = admission()
    feed(adm, *stream(1, 5))

    assert adm.receive(UpstreamMessage(2, "m2")) == Verdict(replay=True)
    assert adm.next_seq == 6


def test_a_seq_received_in_this_session_again_with_other_data_is_a_conflict() -> None:
    """1 "a", 2, then 1 "OTHER": compared, as across owners."""
    adm = admission()
    feed(adm, (1, "a"), (2, "b"))

    verdict = adm.receive(UpstreamMessage(1, "OTHER"))

    assert verdict.fault == Fault(
        "seq 1 sent again with other data than this session received", SEQ_CONFLICTS
    )


def test_a_seq_at_or_below_the_resume_point_is_a_replay_not_compared() -> None:
    adm = admission(resume_checkpoint=100)

    assert adm.receive(UpstreamMessage(99, "whatever")) == Verdict(replay=True)
    assert adm.receive(UpstreamMessage(100, "anything")) == Verdict(replay=True)
    assert adm.next_seq == 101


def test_only_the_last_RECENT_seqs_are_compared() -> None:
    adm = admission()
    feed(adm, *stream(1, RECENT + 1))

    assert adm.receive(UpstreamMessage(1, "other")) == Verdict(replay=True)  # forgotten
    assert adm.receive(UpstreamMessage(2, "other")).fault is not None  # still remembered


@pytest.mark.parametrize(
    ("seq", "data", "reason", "counter"),
    [
        (MAX_SEQ + 1, "x", "seq 9223372036854775808 is not an integer in 0..2^63-1", None),
        (-1, "x", "seq -1 is not an integer in 0..2^63-1", None),
        (True, "x", "seq True is not an integer in 0..2^63-1", None),
        (1, "\ud800", "seq 1: data is not valid Unicode text", None),
        (1, "x" * 65, "seq 1: 65 bytes, more than the sink stores (64)", None),
        (1_000_002, "x", "seq jumped from 0 to 1000002, more than 1000000 ahead", SEQ_JUMPS),
    ],
    ids=["seq-2^63", "seq-negative", "seq-bool", "lone-surrogate", "too-large", "jump"],
)
def test_what_the_sink_cannot_store_or_a_jump_beyond_the_window_is_a_fault(
    seq: int, data: str, reason: str, counter: str | None
) -> None:
    adm = admission()

    verdict = adm.receive(UpstreamMessage(seq, data))

    assert verdict.accept == ()
    assert verdict.fault == Fault(reason, counter or MESSAGES_REJECTED)


def test_the_window_is_measured_from_the_message_held_ahead() -> None:
    adm = admission()
    feed(adm, (1, "m1"), (500_000, "ahead"))

    verdict = adm.receive(UpstreamMessage(1_500_002, "far"))

    assert verdict.fault == Fault(
        "seq jumped from 500000 to 1500002, more than 1000000 ahead", SEQ_JUMPS
    )


def test_the_stream_ending_stores_what_is_held_ahead() -> None:
    adm = admission()
    feed(adm, *stream(1, 3), (10, "m10"))

    assert adm.stream_ended() == Verdict(accept=((10, "m10"),), skipped=(4, 9))
    assert adm.stream_ended() == Verdict()


def test_a_reconnect_forgets_what_is_held_ahead_the_stream_sends_it_again() -> None:
    adm = admission()
    feed(adm, *stream(1, 3), (10, "m10"))

    adm.reconnecting()

    assert adm.holding_ahead is None
    assert adm.receive(UpstreamMessage(4, "m4")).accept == ((4, "m4"),)


def test_a_stream_that_numbers_nothing_is_stored_in_order() -> None:
    adm = admission()

    verdicts = feed(adm, (None, "a"), (None, "b"))

    assert [v.accept for v in verdicts] == [((1, "a"),), ((2, "b"),)]


def test_text_without_a_seq_in_a_sequenced_stream_is_a_fault() -> None:
    adm = admission()
    feed(adm, (1, "m1"))

    verdict = adm.receive(UpstreamMessage(None, "<html>"))

    assert verdict.fault == Fault(
        "a message without a seq in a sequenced stream", MESSAGES_REJECTED
    )


def test_a_resumed_streams_first_message_without_a_seq_waits_for_the_next() -> None:
    numbered_nothing = admission(resume_checkpoint=10)
    assert numbered_nothing.receive(UpstreamMessage(None, "a")) == Verdict()
    assert numbered_nothing.holding_unnumbered
    assert numbered_nothing.receive(UpstreamMessage(None, "b")) == Verdict(
        accept=((11, "a"), (12, "b"))
    )

    sequenced = admission(resume_checkpoint=10)
    sequenced.receive(UpstreamMessage(None, "<html>"))
    assert sequenced.receive(UpstreamMessage(11, "m11")).fault == Fault(
        "a message without a seq in a sequenced stream (resumed)", MESSAGES_REJECTED
    )

    alone = admission(resume_checkpoint=10)
    alone.receive(UpstreamMessage(None, "a"))
    assert alone.stream_ended() == Verdict(accept=((11, "a"),))
