"""`wsfleet status --watch` as a real process on the embedded backend: a fleet written into the
SQLite store (two workers' leases, a connection nobody holds), two refreshes printed whole into
a file (not a terminal), the second seeing a change made between them."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from entrypoints.cli.main import main
from entrypoints.devstack.service import free_port
from tests.e2e.cli_process import cli_process

LEASE_MS = 600_000  # held for the whole test


@pytest.fixture
def scraped_alpha() -> Iterator[str]:
    """A health endpoint of worker `alpha-1` (whose session alpha-1#1 holds leases below): its
    /status, and a /metrics whose ingest-lag histogram gains 10 messages of 0.2 s per scrape."""
    scrapes = 0

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            nonlocal scrapes
            if self.path == "/status":
                body = json.dumps({"worker_id": "alpha-1"}).encode()
            else:
                scrapes += 1
                count = 10 * scrapes
                body = (
                    "# TYPE wsfleet_ingest_lag_seconds histogram\n"
                    f'wsfleet_ingest_lag_seconds_bucket{{le="+Inf"}} {count}\n'
                    f"wsfleet_ingest_lag_seconds_count {count}\n"
                    f"wsfleet_ingest_lag_seconds_sum {0.2 * count}\n"
                ).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


async def test_watch_refreshes_and_shows_load_leases_and_the_waiting(
    tmp_path: Path, scraped_alpha: str
) -> None:
    data = tmp_path / ".wsfleet"
    data.mkdir()
    clock = SystemClock()
    async with SqliteConnectionStore.open(data / "wsfleet.sqlite") as store:
        for i in range(30):
            await store.start(f"c{i:02d}", f"wss://feed.example.com/{i}", clock.now_ms())
        for owner in ("alpha-1#1", "beta-2#1"):
            await store.open_session(owner, LEASE_MS, 100, clock.now_ms())
        for i in range(29):
            owner = "alpha-1#1" if i < 20 else "beta-2#1"
            assert await store.try_acquire(f"c{i:02d}", owner, clock.now_ms())
    dead_probe = f"http://127.0.0.1:{free_port()}"
    watch = await cli_process(
        "watch",
        [
            "status",
            "--watch",
            "--interval",
            "2",
            "--count",
            "2",
            "--top",
            "5",
            "--scrape",
            dead_probe,
            "--scrape",
            scraped_alpha,
        ],
        tmp_path,
        {},
    ).start()
    try:
        await watch.wait_for_line(r"worst \d+:")
        async with SqliteConnectionStore.open(data / "wsfleet.sqlite") as store:
            await store.start("late", "wss://feed.example.com/late", clock.now_ms())
        assert await watch.wait(30) == 0, watch.output()
    finally:
        await watch.kill()
    frames = [f for f in watch.output().split("─" * 20) if "wsfleet at" in f]
    frames = [f.strip("─\n ") for f in frames]
    assert len(frames) == 2, watch.output()
    first, second = frames
    assert "30 connections, 30 started, 0 stopped | 29 held by 2 workers, 1 waiting" in first
    assert "31 connections" in second
    assert "2 waiting for an owner" in second
    for frame in frames:
        assert "alpha-1" in frame
        assert "beta-2" in frame
        assert "load min 9 / median 14.5 / max 20" in frame
        assert "c29" in frame  # the one nobody holds heads the worst list
        assert "unreachable" in frame  # the probe that does not answer
    assert "late" in second
    # The scraped worker's lag is on its session's row (the first look has nothing to compare).
    (alpha_row,) = [line for line in second.splitlines() if line.startswith("alpha-1#1")]
    assert alpha_row.split()[-2:] == ["200", "ms"], second
    assert "alpha-1: " not in second


def test_watch_and_json_together_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data-dir", str(tmp_path), "status", "--watch", "--json"]) == 2
    assert "--watch and --json" in capsys.readouterr().err


@pytest.mark.parametrize("interval", ["0", "x", "7200"])
def test_a_bad_interval_is_refused(interval: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["status", "--watch", "--interval", interval])
    assert exited.value.code == 2
    assert "--interval" in capsys.readouterr().err
