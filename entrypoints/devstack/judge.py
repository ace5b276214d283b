"""The judge of a local run, written once for the demo, the benchmarks and the chaos suite:
what one stream's upstream sent (the simulator's record, entrypoints/devstack/records.py) laid
beside what the sink stored and the store's final checkpoint. Never what the workers say about
themselves.

`judge_stream` gives the facts; each caller states its own bar over them (the demo and the
benchmarks: nothing lost or duplicated, one subscriber at a time; the chaos suite adds the
ownership history, tests/chaos/judge.py)."""

from collections.abc import Sequence

import attrs

from entrypoints.devstack import records
from entrypoints.devstack.records import Record


@attrs.frozen
class StreamFacts:
    connection_id: str
    emitted: int  # seqs the upstream produced (0 without a record)
    checkpoint: int  # the store's final checkpoint
    stored: int  # distinct seqs in the sink
    lost: int  # emitted seqs (1..emitted) the sink does not hold
    missing_below_checkpoint: tuple[int, ...]  # seqs 1..checkpoint the sink does not hold
    duplicated: int  # extra copies of a seq in the sink (its key makes this 0 by design)
    beyond_emitted: int  # stored seqs the upstream never emitted
    beyond_checkpoint: tuple[int, ...]  # stored seqs past the checkpoint, in order
    peak_subscribers: int  # the most subscribers at once, over the whole run
    connects: int
    resent: int  # frames sent more than once (sent - emitted): a lower bound, see below
    redelivered: int  # seqs in more than one subscriber's range (from the ranges sent)
    overlap_ms: int  # time with two or more subscribers at once

    @property
    def copies_beyond_replay(self) -> int:
        """Copies of a seq that no upstream replay explains: for a sink that keeps every copy
        (a stream), a new owner resuming from the checkpoint is sent again what its
        predecessor had (`redelivered`), and each such seq may be stored twice; a copy beyond
        that was put twice by the sink itself (a retried batch). For a keyed sink any copy is
        one too many (`duplicated`)."""
        return max(0, self.duplicated - self.redelivered)

    @property
    def past_checkpoint_contiguous(self) -> bool:
        """Rows past the checkpoint are a run right after it (a flush the store has not
        recorded yet), never a hole."""
        after = self.checkpoint + 1
        return list(self.beyond_checkpoint) == list(
            range(after, after + len(self.beyond_checkpoint))
        )


def judge_stream(
    connection_id: str,
    record: Record | None,
    checkpoint: int,
    stored: Sequence[int],
    ended_ms: int | None = None,
) -> StreamFacts:
    """`stored`: every stored row's seq (a duplicate row appears twice); `ended_ms`: when the
    run ended, for subscribers still connected (now if None).

    `resent` counts a frame once its send completed, so a send to a dying subscriber cut short
    after the bytes left is missed; `redelivered` reads the ranges each subscriber was sent."""
    emitted = int(record["emitted"]) if record else 0
    unique = set(stored)
    end = records.wall_ms() if ended_ms is None else ended_ms
    return StreamFacts(
        connection_id=connection_id,
        emitted=emitted,
        checkpoint=checkpoint,
        stored=len(unique),
        lost=sum(1 for seq in range(1, emitted + 1) if seq not in unique),
        missing_below_checkpoint=tuple(sorted(set(range(1, checkpoint + 1)) - unique)),
        duplicated=len(stored) - len(unique),
        beyond_emitted=sum(1 for seq in unique if seq > emitted or seq < 1),
        beyond_checkpoint=tuple(sorted(s for s in stored if s > checkpoint)),
        peak_subscribers=int(record["peak_subscribers"]) if record else 0,
        connects=int(record["connects"]) if record else 0,
        resent=max(0, int(record["sent"]) - emitted) if record else 0,
        redelivered=records.redelivered(record) if record else 0,
        overlap_ms=records.overlap_ms(record, end) if record else 0,
    )
