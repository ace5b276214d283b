"""The `status --watch` frame on a synthetic fleet of 10,000 connections: aggregated (workers
by load, lease time left in buckets), the worst N listed, and a frame that fits a screen."""

import io

from rich.console import Console

from domain import NO_OWNER, Connection, DesiredState, WorkerSession
from entrypoints.cli.fleet_view import render, summarize

NOW = 1_700_000_000_000


def sessions(workers: int = 40) -> dict[str, WorkerSession]:
    """Live sessions w00.. with their leases ending 1-20 s from now, and 20 dead ones d00..
    that expired 1-20 s ago (their connections wait for a takeover, longer as the index
    grows)."""
    live = {
        f"w{k:02d}": WorkerSession(f"w{k:02d}", 5, NOW + 1 + (k * 997) % 20_000)
        for k in range(workers)
    }
    dead = {f"d{j:02d}": WorkerSession(f"d{j:02d}", 5, NOW - 1000 * (j + 1)) for j in range(20)}
    return live | dead


def fleet(size: int = 10_000, workers: int = 40) -> list[Connection]:
    """`workers` owners holding most connections unevenly, plus some waiting, backing off and
    stopped ones: connection i is held by worker i % workers unless a rule below says not."""
    connections = []
    for i in range(size):
        owner, not_before, state = f"w{i % workers:02d}", 0, "S"
        if i % 7 == 0:
            owner = f"w{i % 3:02d}"  # the first three workers carry extra load
        if i % 500 == 1:
            owner = f"d{i // 500:02d}"  # its session died: waiting for a takeover
        if i % 997 == 2:
            owner, not_before = NO_OWNER, NOW + 60_000  # backing off
        if i % 1000 == 3:
            state = "X"
        connections.append(
            Connection(
                connection_id=f"c{i:05d}",
                version=3,
                desired_state=DesiredState.STARTED if state == "S" else DesiredState.STOPPED,
                ws_url="wss://feed.example.com/x",
                owner=owner,
                token=1,
                checkpoint_seq=i,
                not_before_ms=not_before,
                updated_at_ms=NOW - 30_000,
            )
        )
    return connections


def test_the_summary_counts_every_connection_once() -> None:
    connections = fleet()
    summary = summarize(connections, NOW, 10, sessions())
    assert summary.total == 10_000
    assert summary.stopped == 10
    assert summary.started == summary.held + summary.waiting + summary.backing_off
    assert summary.backing_off == sum(1 for i in range(10_000) if i % 997 == 2 and i % 1000 != 3)
    assert sum(w.held for w in summary.workers) == summary.held
    assert sum(summary.lease_buckets) == summary.held
    assert len(summary.workers) == 40
    assert {w.session_id for w in summary.workers[:3]} == {"w00", "w01", "w02"}
    assert summary.workers[0].held > summary.workers[3].held


def test_the_worst_are_the_longest_waiting_then_the_least_lease_left() -> None:
    summary = summarize(fleet(), NOW, 10, sessions())
    waits = [a.waiting_ms for a in summary.attention]
    assert len(summary.attention) == 10
    assert all(a.state == "waiting" for a in summary.attention)
    assert waits == sorted(waits, reverse=True)
    assert summary.attention[0].connection.connection_id == "c09501"  # d19 expired 20 s ago

    small = summarize(fleet(size=40, workers=4), NOW, 5, sessions(4))
    held = [a for a in small.attention if a.state == "held"]
    assert [a.lease_left_ms for a in held] == sorted(a.lease_left_ms for a in held)


def test_a_frame_of_ten_thousand_connections_fits_a_screen() -> None:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(
        render(fleet(), NOW, top=10, lags={"w00": "35 ms"}, truncated=False, sessions=sessions())
    )
    text = out.getvalue()
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert "10000 connections" in text
    assert "held by 40 workers" in text
    assert "... 30 more workers" in text
    assert "35 ms" in text
    assert "c09501" in text
    assert "lease left of held connections" in text


def test_an_empty_fleet_renders() -> None:
    out = io.StringIO()
    Console(file=out, width=100).print(render([], NOW, top=5))
    assert "0 connections" in out.getvalue()
    assert "no worker holds a lease" in out.getvalue()


def test_a_scraped_lag_shows_on_the_rows_of_that_workers_sessions() -> None:
    """GIVEN leases owned by sessions `<worker id>#<n>` and lags scraped per worker id, THEN
    each session's row shows its worker's lag, and no worker listed in the table is repeated
    among the "other scraped workers"."""
    held = {"alpha-1#2": WorkerSession("alpha-1#2", 5, NOW + 10_000)}
    connections = [
        Connection(
            connection_id=f"c{i}",
            version=3,
            desired_state=DesiredState.STARTED,
            ws_url="wss://feed.example.com/x",
            owner="alpha-1#2",
            token=1,
        )
        for i in range(3)
    ]
    out = io.StringIO()
    lags = {"alpha-1": "202 ms", "gamma-3": "idle"}
    Console(file=out, width=120, color_system=None).print(
        render(connections, NOW, lags=lags, sessions=held)
    )
    text = out.getvalue()
    (row,) = [line for line in text.splitlines() if line.startswith("alpha-1#2")]
    assert row.split()[-2:] == ["202", "ms"], text
    assert "other scraped workers  gamma-3: idle" in text
    assert "alpha-1:" not in text
