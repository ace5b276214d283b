"""Child processes for benchmarks: output to files (never an unread pipe that could fill and
block the child), a parseable "listening on URL" line, signals by pid, RSS from /proc."""

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from entrypoints.devstack.service import ROOT, child_env, free_port

__all__ = ["ROOT", "Child", "child_env", "cpu_seconds", "free_port", "rss_kib"]
_URL = re.compile(r"(?:listening on|serving on) (\S+://\S+)")


class Child:
    """One subprocess: `python -m <module> <args>` (or any argv) with logs under `log_dir`."""

    def __init__(
        self, name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.out = log_dir / f"{name}.out"
        self.err = log_dir / f"{name}.err"
        self.process: asyncio.subprocess.Process | None = None

    @classmethod
    def python(
        cls, name: str, module: str, args: Sequence[str], env: Mapping[str, str], log_dir: Path
    ) -> "Child":
        return cls(name, [sys.executable, "-m", module, *args], env, log_dir)

    async def start(self) -> "Child":
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv, env=self.env, cwd=ROOT, stdout=out, stderr=err
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def wait_for_url(self, timeout_s: float = 30.0) -> str:
        """The first "listening on <url>" line the child printed (stdout or stderr)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for path in (self.out, self.err):
                match = _URL.search(path.read_text(errors="replace")) if path.exists() else None
                if match:
                    return match.group(1)
            if not self.running:
                raise RuntimeError(f"{self.name} exited early:\n{self.tail()}")
            await asyncio.sleep(0.05)
        raise TimeoutError(f"{self.name} printed no URL in {timeout_s}s:\n{self.tail()}")

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)

    async def wait(self, timeout_s: float) -> int | None:
        assert self.process is not None
        try:
            return await asyncio.wait_for(self.process.wait(), timeout_s)
        except TimeoutError:
            return None

    async def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s`: nothing the runner started outlives it."""
        if not self.running:
            return
        self.signal(signal.SIGTERM)
        if await self.wait(grace_s) is None:
            self.signal(signal.SIGKILL)
            await self.wait(5.0)

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def tail(self, lines: int = 30) -> str:
        text = ""
        for path in (self.out, self.err):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
        return text


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` in KiB (VmRSS), 0 if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) if match else 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (from /proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks
