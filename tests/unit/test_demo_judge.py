"""The demo's bar (entrypoints/demo/judge.py): a table sink may hold no copy of a seq; a stream
(Kinesis) may, but only of what the upstream sent again after a move."""

from domain import Connection, DesiredState, StopReason
from entrypoints.demo.judge import judge_connection, violations
from tests.unit.test_devstack_judge import record


def ended(checkpoint: int) -> Connection:
    return Connection(
        connection_id="c",
        version=4,
        ws_url="ws://upstream/c",
        desired_state=DesiredState.STOPPED,
        checkpoint_seq=checkpoint,
        stop_reason=StopReason.STREAM_ENDED,
    )


# A crash: the first owner was sent 1-6, the next resumed from the checkpoint at 3 (4-6 sent
# again, then 7-8); the stream ended at 8, checkpoint 8.
REPLAYED = {**record(8, 11, [(1, 6, 0, 50), (4, 8, 60, 100)]), "peak_subscribers": 1}


def test_a_stream_holding_copies_of_the_replayed_seqs_only_is_no_violation() -> None:
    stored = [1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8]  # 4-6 put by both owners
    result = judge_connection("c", REPLAYED, ended(8), stored, None)

    assert (result.lost, result.duplicated, result.redelivered) == (0, 3, 3)
    assert violations([result], [], sink_keeps_copies=True) == []
    assert violations([result], []) == ["c: 3 seqs stored more than once"]


def test_a_copy_beyond_what_the_upstream_sent_again_is_a_violation() -> None:
    stored = [1, 2, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8]  # 2 put twice by the sink itself
    result = judge_connection("c", REPLAYED, ended(8), stored, None)

    assert violations([result], [], sink_keeps_copies=True) == [
        "c: 4 copies in the stream, more than the 3 seqs the upstream sent again"
    ]


def test_a_lost_message_is_a_violation_whatever_the_sink() -> None:
    stored = [1, 2, 3, 4, 5, 6, 4, 5, 6, 8]  # 7 never arrived
    result = judge_connection("c", REPLAYED, ended(8), stored, None)

    assert violations([result], [], sink_keeps_copies=True) == [
        "c: 1 of 8 emitted messages are not in the sink"
    ]
