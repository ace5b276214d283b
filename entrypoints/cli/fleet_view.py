"""What `wsfleet status --watch` shows: the fleet aggregated, so that one screen stays readable
at 10,000 connections — totals, each worker's load (the busiest `top` listed, the rest summed),
how much lease time the held connections have left, and the `top` connections most in need of
attention (waiting longest for an owner, then closest to losing their lease).

Pure: connections and `now_ms` in, a rich renderable out (tested on a synthetic fleet).
"""

import heapq
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

import attrs
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from application.worker.session_keeper import worker_of
from domain import Connection, DesiredState, LeaseStatus, SessionLookup
from entrypoints.cli.tables import owner_text, utc

# Lease time left of held connections, in seconds: [low, high) per bucket.
LEASE_BUCKETS_S: tuple[tuple[float, float], ...] = ((0, 2), (2, 5), (5, 10), (10, float("inf")))


@attrs.frozen
class WorkerLoad:
    """The connections one worker session holds (a lease's owner is a session id,
    `<worker id>#<n>`)."""

    session_id: str
    held: int
    min_lease_left_ms: int


@attrs.frozen
class Attention:
    """A started connection worth a look: `waiting_ms` without an owner (>= 0), or held with
    `lease_left_ms` to go."""

    connection: Connection
    state: str
    waiting_ms: int
    lease_left_ms: int


@attrs.frozen
class FleetSummary:
    total: int
    started: int
    stopped: int
    held: int
    waiting: int  # started, free to take, nobody holds it
    backing_off: int  # started, resting after upstream failures
    workers: tuple[WorkerLoad, ...]  # by load, busiest first
    lease_buckets: tuple[int, ...]  # held connections per LEASE_BUCKETS_S bucket
    attention: tuple[Attention, ...]  # the `top` worst, worst first


def summarize(
    connections: Sequence[Connection], now_ms: int, top: int, sessions: SessionLookup
) -> FleetSummary:
    """One pass over the connections plus two bounded selections: O(n log top). A lease's
    time left is its owner session's."""
    started = held = waiting = backing_off = 0
    loads: Counter[str] = Counter()
    min_left: dict[str, int] = {}
    buckets = [0] * len(LEASE_BUCKETS_S)
    candidates: list[Attention] = []
    for conn in connections:
        if conn.desired_state is not DesiredState.STARTED:
            continue
        started += 1
        if conn.lease_status(now_ms, sessions) is LeaseStatus.HELD:
            held += 1
            left = sessions[conn.owner].expires_at_ms - now_ms
            loads[conn.owner] += 1
            min_left[conn.owner] = min(left, min_left.get(conn.owner, left))
            buckets[_bucket(left / 1000)] += 1
            candidates.append(Attention(conn, "held", 0, left))
        elif conn.not_before_ms > now_ms:
            backing_off += 1
        else:
            waiting += 1
            # Free since its owner's session died, its back-off ended, or it was (re)started.
            owner = sessions.get(conn.owner)
            died = owner.expires_at_ms if owner is not None and owner.ended_reason is None else 0
            since = max(died, conn.not_before_ms, conn.updated_at_ms)
            candidates.append(Attention(conn, "waiting", max(0, now_ms - since), 0))
    # Worst first: the longest wait for an owner, then the least lease time left.
    worst = heapq.nsmallest(top, candidates, key=lambda a: (-a.waiting_ms, a.lease_left_ms))
    workers = sorted(
        (WorkerLoad(owner, n, min_left[owner]) for owner, n in loads.items()),
        key=lambda w: (-w.held, w.session_id),
    )
    return FleetSummary(
        total=len(connections),
        started=started,
        stopped=len(connections) - started,
        held=held,
        waiting=waiting,
        backing_off=backing_off,
        workers=tuple(workers),
        lease_buckets=tuple(buckets),
        attention=tuple(worst),
    )


def render(
    connections: Sequence[Connection],
    now_ms: int,
    *,
    top: int = 10,
    lags: Mapping[str, str] | None = None,
    truncated: bool = False,
    sessions: SessionLookup | None = None,
) -> RenderableType:
    """The whole frame. `lags`: worker id -> its ingest lag as text, where known (scraped;
    shown on the rows of that worker's sessions); `truncated`: the listing stopped at --limit,
    so the totals are a lower bound."""
    sessions = sessions or {}
    summary = summarize(connections, now_ms, top, sessions)
    lags = lags or {}
    listed = {worker_of(w.session_id) for w in summary.workers[:top]}
    # Scraped workers not in the table (holding nothing, not in the top, or unreachable).
    others = "  ".join(f"{worker}: {lag}" for worker, lag in lags.items() if worker not in listed)
    return Group(
        _headline(summary, now_ms, truncated),
        _workers(summary, top, lags),
        *([Text("other scraped workers  " + others)] if others else []),
        _lease_line(summary),
        _attention(summary, now_ms, sessions),
    )


def _headline(s: FleetSummary, now_ms: int, truncated: bool) -> Text:
    more = " (--limit reached: at least)" if truncated else ""
    return Text(
        f"wsfleet at {utc(now_ms)} UTC{more}: {s.total} connections, {s.started} started, "
        f"{s.stopped} stopped | {s.held} held by {len(s.workers)} workers, "
        f"{s.waiting} waiting for an owner, {s.backing_off} backing off"
    )


def _workers(s: FleetSummary, top: int, lags: Mapping[str, str]) -> RenderableType:
    if not s.workers:
        return Text("no worker holds a lease")
    loads = [w.held for w in s.workers]
    title = (
        f"workers: load min {min(loads)} / median {statistics.median(loads):g} / max {max(loads)}"
    )
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("worker")
    table.add_column("held", justify="right")
    table.add_column("min lease left", justify="right")
    table.add_column("ingest lag", justify="right")
    for load in s.workers[:top]:
        table.add_row(
            load.session_id,
            str(load.held),
            f"{load.min_lease_left_ms / 1000:.1f}s",
            lags.get(worker_of(load.session_id), "-"),
        )
    rest = s.workers[top:]
    if rest:
        table.add_row(f"... {len(rest)} more workers", str(sum(w.held for w in rest)), "", "")
    return _titled(title, table)


def _titled(title: str, table: Table) -> RenderableType:
    """A line above the table, not its title: rich wraps a title to the table's width, which
    split "max 5000" onto a line of its own at 10,000 connections (tests/e2e/renders)."""
    return Group(Text(title), table)


def _lease_line(s: FleetSummary) -> Text:
    parts = [
        f"{_span(low, high)}: {n}"
        for (low, high), n in zip(LEASE_BUCKETS_S, s.lease_buckets, strict=True)
    ]
    return Text("lease left of held connections  " + "  ".join(parts))


def _attention(s: FleetSummary, now_ms: int, sessions: SessionLookup) -> RenderableType:
    if not s.attention:
        return Text("no started connections")
    title = f"worst {len(s.attention)}: longest without an owner, then least lease left"
    table = Table(show_edge=False, pad_edge=False)
    for name in ("connection", "owner", "state", "for / left", "checkpoint"):
        table.add_column(name, justify="right" if name in ("for / left", "checkpoint") else "left")
    for item in s.attention:
        conn = item.connection
        if item.state == "waiting":
            when = f"waiting {item.waiting_ms / 1000:.1f}s"
            owner = owner_text(conn) + (
                " (expired)" if conn.lease_status(now_ms, sessions) is LeaseStatus.EXPIRED else ""
            )
        else:
            when = f"{item.lease_left_ms / 1000:.1f}s left"
            owner = conn.owner
        table.add_row(conn.connection_id, owner, item.state, when, str(conn.checkpoint_seq))
    return _titled(title, table)


def _bucket(seconds: float) -> int:
    for index, (low, high) in enumerate(LEASE_BUCKETS_S):
        if low <= seconds < high:
            return index
    return 0  # negative: not held, never counted here


def _span(low: float, high: float) -> str:
    return f">={low:g}s" if high == float("inf") else f"{low:g}-{high:g}s"
