"""`wsfleet` as a real subprocess: one-shot commands (`run_cli`) and long-running ones
(`CliProcess`: output in a file, never an unread pipe that could fill and block it; the line
it prints when ready; signals by pid)."""

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCRIPT = Path(sys.executable).with_name("wsfleet")


def command(args: Sequence[str]) -> list[str]:
    """The installed console script when there is one (it is what users run), else `-m`."""
    if SCRIPT.exists():
        return [str(SCRIPT), *args]
    return [sys.executable, "-m", "entrypoints.cli", *args]


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without WSFLEET_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WSFLEET_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def run_cli(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(args),
        cwd=cwd,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


class CliProcess:
    def __init__(self, name: str, args: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.name = name
        self.args = list(args)
        self.cwd = cwd
        self.env = cli_env(env)
        self.log = cwd / f"{name}.log"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> "CliProcess":
        with self.log.open("wb") as out:
            self.process = await asyncio.create_subprocess_exec(
                *command(self.args),
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def wait_for_line(self, pattern: str, timeout_s: float = 30.0) -> re.Match[str]:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = regex.search(self.output())
            if found:
                return found
            if not self.running:
                raise AssertionError(f"{self.name} exited early:\n{self.output()}")
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name}: no {pattern!r} after {timeout_s}s:\n{self.output()}")

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    async def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    async def stop(self) -> None:
        """Teardown: kill whatever still runs."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            await self.process.wait()

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
