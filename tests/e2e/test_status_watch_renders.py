"""`wsfleet status --watch` on a real terminal: the CLI run inside tmux at 80x24 and 200x50,
over a SQLite store seeded with 10 and with 10,000 connections, and the screen tmux holds
compared with a kept render (tests/e2e/renders/*.txt). The renders are what an operator sees;
read them when one changes (`WSFLEET_UPDATE_RENDERS=1` rewrites them from this run).

The fleet is seeded an hour in the past with leases of 10 minutes, so every clock-dependent
number keeps its width for the whole run; the normalising turns their digits into `#` (the
times in the headline, the waits and the lease times left) and nothing else. Needs tmux (not
python3 and make alone): without it the test is skipped saying so, and fails under CI=true.
"""

import asyncio
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from entrypoints.devstack.service import child_env
from tests.e2e.cli_process import command

RENDERS = Path(__file__).with_name("renders")
SIZES = [(80, 24), (200, 50)]
FLEETS = [10, 10_000]
HOUR_MS = 3_600_000
LEASE_MS = 600_000
# Live sessions hold 5, 2 and 1 of every 10 connections; a dead one held 1; 1 waits.
OWNERS = ["alpha-1#1"] * 5 + ["beta-2#1"] * 2 + ["gamma-3#1", "delta-4#1", ""]
DEAD = "delta-4#1"
FRAME_TIMEOUT_S = 60.0
CLOCK_TEXT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}|\d+\.\ds\b")


def normalise(screen: str) -> str:
    """The digits of clock-dependent numbers as `#`, trailing blanks and lines dropped."""
    lines = [
        CLOCK_TEXT.sub(lambda m: re.sub(r"\d", "#", m[0]), line).rstrip()
        for line in screen.splitlines()
    ]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


async def seed(data: Path, count: int) -> None:
    """`count` connections started an hour ago; every tenth one stopped (of those nobody
    holds); the rest held as OWNERS says, the dead session's expired an hour ago."""
    now = SystemClock().now_ms()
    then = now - HOUR_MS
    async with SqliteConnectionStore.open(data / "wsfleet.sqlite") as store:
        await store.open_session(DEAD, 1_000, 10_000, then)
        for sid in sorted({o for o in OWNERS if o and o != DEAD}):
            await store.open_session(sid, LEASE_MS, 10_000, now)
        ids = [f"feed-{i:05d}" for i in range(count)]

        async def one(i: int, cid: str) -> None:
            owner = OWNERS[i % len(OWNERS)]
            at = then if owner in ("", DEAD) else now
            await store.start(cid, f"wss://feeds.example.com/{i}", then)
            if owner:
                assert await store.try_acquire(cid, owner, at) is not None
            elif i % 100 == 99:
                await store.stop(cid, then)

        for start in range(0, count, 500):  # side by side: the store groups the commits
            await asyncio.gather(*(one(i, ids[i]) for i in range(start, min(count, start + 500))))


@pytest.fixture(scope="module")
def tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and tmux is not installed", pytrace=False)
        pytest.skip("tmux is not installed: the terminal renders cannot be taken")
    return found


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """One data directory per fleet size, seeded once for both terminal sizes."""
    seeded = {}
    for count in FLEETS:
        home = tmp_path_factory.mktemp(f"fleet{count}")
        (home / ".wsfleet").mkdir(mode=0o700)
        asyncio.run(seed(home / ".wsfleet", count))
        # Private, as the CLI makes a data directory (else every frame starts with its warning).
        for path in (home / ".wsfleet").iterdir():
            path.chmod(0o600)
        seeded[count] = home
    return seeded


def screen_of(tmux: str, home: Path, width: int, height: int) -> str:
    """The screen of `wsfleet status --watch` in a tmux of its own (a socket in `home`), once
    its first frame is drawn."""
    socket = str(home / f"tmux-{width}x{height}.sock")
    # Without the tests' asyncio debug mode: its slow-callback reports are no part of a frame.
    env = child_env({"WSFLEET_DATA_DIR": str(home / ".wsfleet"), "TERM": "xterm-256color"})
    for sized in ("COLUMNS", "LINES"):  # rich obeys these over the terminal (pytest sets them)
        env.pop(sized, None)
    args = ["status", "--watch", "--interval", "3600", "--limit", "100000"]
    tmux_cmd = [tmux, "-S", socket, "-f", os.devnull]
    size = ["-x", str(width), "-y", str(height)]
    subprocess.run(
        # A new server (its own socket) takes its environment from this call.
        [*tmux_cmd, "new-session", "-d", *size, "-s", "watch", *command(args)],
        check=True,
        cwd=home,
        env=env,
    )
    try:
        deadline = time.monotonic() + FRAME_TIMEOUT_S
        while True:
            screen = subprocess.run(
                [*tmux_cmd, "capture-pane", "-p", "-t", "watch"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            if "lease left of held" in screen or time.monotonic() > deadline:
                return screen
            time.sleep(0.2)
    finally:
        subprocess.run([*tmux_cmd, "kill-server"], check=False, capture_output=True)


@pytest.mark.parametrize("count", FLEETS)
@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_status_watch_on_a_terminal_renders_as_kept(
    tmux: str, fleets: dict[int, Path], width: int, height: int, count: int
) -> None:
    screen = normalise(screen_of(tmux, fleets[count], width, height))
    kept = RENDERS / f"status_watch_{width}x{height}_{count}.txt"

    if os.environ.get("WSFLEET_UPDATE_RENDERS") == "1":
        RENDERS.mkdir(exist_ok=True)
        kept.write_text(screen)
    assert "wsfleet at ####-##-## ##:##:##.### UTC" in screen, screen
    assert max(len(line) for line in screen.splitlines()) <= width
    assert len(screen.splitlines()) <= height
    assert screen == kept.read_text(), f"the render changed; as it is now:\n{screen}"
