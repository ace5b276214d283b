"""The demo's verdict: the dev stack's judge (entrypoints/devstack/judge.py) over the
simulator's records and what the sink stored, not what the workers say about themselves.

Per connection (its stream ended, so everything emitted is known):
- lost: seqs the upstream emitted (1..emitted) that the sink does not hold. The workers also
  recorded checkpoint == emitted, so "up to the final checkpoint" is the same set.
- duplicated: extra copies of a seq in the sink. A table's key is (connection, seq), so there
  this is 0 by construction; it is counted from what is read back anyway. A Kinesis stream
  keeps every record it is given: a new owner after the crash resumes from the checkpoint
  recorded with the connection, and what the old owner had put past it is put again. The
  reader's rule (adapters/kinesis/message_reader.py) keeps one per seq; the judge counts the
  copies it dropped, and holds them to what the upstream sent more than once (redelivered,
  from the ranges each subscriber was sent): a copy beyond that was put twice by the sink
  (entrypoints/devstack/judge.py, `copies_beyond_replay`).
- re-sent: frames the upstream sent more than once, across subscribers (sent - emitted): the
  messages between a crashed owner's last checkpoint and its death, replayed to the new owner.
  They are not duplicates in the sink: the new owner's writes overwrite the same keys (the
  SQLite sink counts those rewrites, exactly). A lower bound: the simulator counts a frame once
  its send completes, and a send to a dying subscriber can be cut short after the bytes left.
- peak subscribers: the most subscribers the stream ever had at once, over the whole run.
Per move (the crash, the graceful handoff): for each connection the stopped worker held, the
time from the signal to the new owner's connect as the simulator saw it, and the ownership
event that moved it (LeaseTakenOver after a crash: the lease expired; LeaseAcquired after a
handoff: it was released) and the worker it made the owner (after a crash: a survivor, or the
replacement started in the killed worker's place, which the table tells apart).
Per balance move (a release for balancing, reason "rebalance"): the time from the release to
the next owner's connect.
"""

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from application.worker.session import RELEASE_REASONS, SessionEnd
from application.worker.session_keeper import worker_of
from application.worker_ids import name_of
from domain import (
    Connection,
    DesiredState,
    Event,
    LeaseAcquired,
    LeaseReleased,
    LeaseTakenOver,
    StopReason,
)
from entrypoints.devstack.judge import judge_stream

BALANCE_REASON = RELEASE_REASONS[SessionEnd.REBALANCE]  # LeaseReleased.reason of a balance move


@attrs.frozen
class Move:
    kind: str  # "crash" (SIGKILL) or "handoff" (SIGTERM)
    worker: str
    signal_at_ms: int
    connection_ids: tuple[str, ...]
    exit_code: int | None  # of the signalled worker
    replacement: str | None = None  # the worker started in its place after a crash


@attrs.frozen
class Takeover:
    connection_id: str
    ms: int | None  # None: no new subscriber after the signal
    via: str  # the ownership event that moved it
    taken_by: str = ""  # the name of the worker that event made the owner


@attrs.frozen
class Rebalanced:
    """A move of balancing: the owner released it ("rebalance") to a worker short of its
    share; `ms` from that release to the next owner's connect (None: no connect after it)."""

    connection_id: str
    released_at_ms: int
    ms: int | None


@attrs.frozen
class ConnectionResult:
    connection_id: str
    emitted: int
    stored: int
    lost: int
    duplicated: int
    beyond_emitted: int
    checkpoint: int
    peak_subscribers: int
    connects: int
    resent: int
    redelivered: int
    copies_beyond_replay: int
    # The two below are the demo's own; everything above is the dev stack judge's fact.
    rewrites: int | None
    ended: bool


@attrs.frozen
class Summary:
    backend: str
    connections: list[ConnectionResult]
    moves: list[tuple[Move, list[Takeover]]]
    violations: list[str]
    rebalanced: list[Rebalanced] = attrs.field(factory=list)
    sink: str = "sqlite"
    sink_keeps_copies: bool = False  # a stream: duplicates counted, bounded, not refused

    @property
    def ok(self) -> bool:
        return not self.violations

    def total(self, field: str) -> int:
        return sum(getattr(c, field) or 0 for c in self.connections)

    @property
    def sink_rewrites(self) -> int | None:
        """Writes that hit an already stored seq, where the sink counts them (SQLite)."""
        if any(c.rewrites is None for c in self.connections):
            return None
        return self.total("rewrites")

    @property
    def max_peak_subscribers(self) -> int:
        return max((c.peak_subscribers for c in self.connections), default=0)

    def takeover_stats(self, kind: str) -> dict[str, float] | None:
        times = [t.ms for m, ts in self.moves if m.kind == kind for t in ts if t.ms is not None]
        if not times:
            return None
        return {
            "count": len(times),
            "min_ms": min(times),
            "median_ms": statistics.median(times),
            "max_ms": max(times),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "backend": self.backend,
            "sink": self.sink,
            "violations": self.violations,
            "totals": {
                "connections": len(self.connections),
                "emitted": self.total("emitted"),
                "stored": self.total("stored"),
                "lost": self.total("lost"),
                "duplicated": self.total("duplicated"),
                "resent_by_upstream": self.total("resent"),
                "redelivered_by_upstream": self.total("redelivered"),
                "sink_rewrites": self.sink_rewrites,
                "max_peak_subscribers": self.max_peak_subscribers,
            },
            "takeover": {
                "crash": self.takeover_stats("crash"),
                "handoff": self.takeover_stats("handoff"),
            },
            "moves": [
                {**attrs.asdict(move), "takeovers": [attrs.asdict(t) for t in takeovers]}
                for move, takeovers in self.moves
            ],
            "rebalanced": [attrs.asdict(r) for r in self.rebalanced],
            "connections": [attrs.asdict(c) for c in self.connections],
        }


def judge_connection(
    connection_id: str,
    record: Mapping[str, Any] | None,
    conn: Connection | None,
    stored: Sequence[int],
    rewrites: int | None,
) -> ConnectionResult:
    facts = judge_stream(connection_id, record, conn.checkpoint_seq if conn else 0, stored)
    judged = {f.name: getattr(facts, f.name) for f in attrs.fields(ConnectionResult)[:-2]}
    ended = (
        conn is not None
        and conn.desired_state is DesiredState.STOPPED
        and conn.stop_reason is StopReason.STREAM_ENDED
    )
    return ConnectionResult(**judged, rewrites=rewrites, ended=ended)


def takeovers(
    move: Move, streams: Mapping[str, Mapping[str, Any]], histories: Mapping[str, Sequence[Event]]
) -> list[Takeover]:
    found = []
    for cid in move.connection_ids:
        connects = [
            c["connected_at_ms"]
            for c in streams.get(cid, {}).get("connections", [])
            if c["connected_at_ms"] >= move.signal_at_ms
        ]
        moved_by = next(
            (
                e
                for e in histories.get(cid, ())
                if isinstance(e, LeaseAcquired | LeaseTakenOver) and e.at_ms >= move.signal_at_ms
            ),
            None,
        )
        ms = min(connects) - move.signal_at_ms if connects else None
        via = "none" if moved_by is None else type(moved_by).__name__
        taker = "" if moved_by is None else name_of(worker_of(moved_by.owner))
        found.append(Takeover(cid, ms, via, taker))
    return found


def rebalances(
    streams: Mapping[str, Mapping[str, Any]], histories: Mapping[str, Sequence[Event]]
) -> list[Rebalanced]:
    """Every release for balancing in the histories, with the time to the next connect."""
    found = []
    for cid, events in histories.items():
        for e in events:
            if not (isinstance(e, LeaseReleased) and e.reason == BALANCE_REASON):
                continue
            connects = [
                c["connected_at_ms"]
                for c in streams.get(cid, {}).get("connections", [])
                if c["connected_at_ms"] >= e.at_ms
            ]
            found.append(Rebalanced(cid, e.at_ms, min(connects) - e.at_ms if connects else None))
    return found


def violations(
    results: Sequence[ConnectionResult],
    moves: Sequence[tuple[Move, list[Takeover]]],
    *,
    sink_keeps_copies: bool = False,
) -> list[str]:
    problems = []
    for r in results:
        cid = r.connection_id
        if r.lost:
            problems.append(f"{cid}: {r.lost} of {r.emitted} emitted messages are not in the sink")
        if sink_keeps_copies and r.copies_beyond_replay:
            problems.append(
                f"{cid}: {r.duplicated} copies in the stream, more than the {r.redelivered} "
                "seqs the upstream sent again"
            )
        elif r.duplicated and not sink_keeps_copies:
            problems.append(f"{cid}: {r.duplicated} seqs stored more than once")
        if r.beyond_emitted:
            problems.append(f"{cid}: {r.beyond_emitted} stored seqs were never emitted")
        if r.peak_subscribers > 1:
            problems.append(f"{cid}: {r.peak_subscribers} subscribers at once (must be 1)")
        if not r.ended or r.checkpoint != r.emitted:
            problems.append(
                f"{cid}: not ended cleanly (checkpoint {r.checkpoint}, emitted {r.emitted})"
            )
    for move, moved in moves:
        expected = "LeaseTakenOver" if move.kind == "crash" else "LeaseAcquired"
        for t in moved:
            if t.ms is None:
                problems.append(f"{t.connection_id}: no new subscriber after the {move.kind}")
            elif t.via != expected:
                problems.append(
                    f"{t.connection_id}: moved by {t.via} after the {move.kind}, "
                    f"expected {expected}"
                )
        if move.kind == "handoff" and move.exit_code != 0:
            problems.append(f"{move.worker} exited {move.exit_code} after SIGTERM (expected 0)")
    return problems
