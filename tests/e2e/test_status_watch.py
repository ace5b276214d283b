"""`wsfleet status --watch` as a real process on the embedded backend: a fleet written into the
SQLite store (two workers' leases, a connection nobody holds), two refreshes printed whole into
a file (not a terminal), the second seeing a change made between them."""

from pathlib import Path

import pytest

from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from entrypoints.cli.main import main
from entrypoints.devstack.service import free_port
from tests.e2e.cli_process import cli_process

LEASE_MS = 600_000  # held for the whole test


async def test_watch_refreshes_and_shows_load_leases_and_the_waiting(tmp_path: Path) -> None:
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
