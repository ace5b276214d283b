"""Child processes of a chaos run: output to files (never a pipe nobody reads, which would
block the child once full), signals by pid, and the evidence a failure report needs."""

import asyncio
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from entrypoints.devstack.service import ROOT, child_env

__all__ = ["ROOT", "Child", "child_env"]


# Asks for SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG = 1; it survives exec), checks
# the parent did not die before that, then becomes the real command (same pid).
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class Child:
    def __init__(self, name: str, log_dir: Path) -> None:
        self.name = name
        self.stdout = log_dir / f"{name}.out"
        self.stderr = log_dir / f"{name}.err"
        self.process: asyncio.subprocess.Process | None = None
        self._log_offset = 0
        self._log_lines: list[dict[str, Any]] = []

    async def spawn(self, argv: list[str], env: dict[str, str]) -> None:
        """`python <argv>`, which the kernel kills if the harness dies first (a soak
        interrupted hard must not leave workers behind)."""
        command = [sys.executable, *argv]
        if sys.platform == "linux":
            command = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = await asyncio.create_subprocess_exec(
                *command, env=env, cwd=ROOT, stdout=out, stderr=err
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)

    async def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    async def kill(self) -> None:
        """Teardown: SIGKILL if still running (SIGCONT first is not needed: SIGKILL also ends
        a stopped process)."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            await self.process.wait()

    async def wait_for_line(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            text = await asyncio.to_thread(self.stdout.read_text)
            match = regex.search(text)
            if match:
                return match
            if not self.running:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name}: no line matching {pattern!r}\n{self.tail()}")

    async def log_lines(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (read incrementally)."""
        chunk = await asyncio.to_thread(self._read_new)
        for line in chunk.splitlines():
            try:
                self._log_lines.append(json.loads(line))
            except ValueError:
                self._log_lines.append({"unparsed": line})
        return self._log_lines

    def _read_new(self) -> str:
        with self.stdout.open("rb") as f:
            f.seek(self._log_offset)
            data = f.read()
        complete = data.rfind(b"\n") + 1  # a line being written is read next time
        self._log_offset += complete
        return data[:complete].decode(errors="replace")

    def tail(self, lines: int = 25) -> str:
        out = _tail(self.stdout, lines)
        err = _tail(self.stderr, lines)
        return f"--- {self.name} stdout (last {lines}) ---\n{out}\n--- stderr ---\n{err}"


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(none)"
