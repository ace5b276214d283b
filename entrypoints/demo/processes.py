"""The demo's child processes: started, watched, signalled and always ended.

Each child is `python -m <module> ...` on this interpreter, in a session (and process group)
of its own: a Ctrl-C in the terminal reaches only the demo, which then ends its children in
order (workers first, gracefully, so they release their leases), and a signal sent to one child
reaches nothing else. Output goes to one log file per child. `close()` ends every child that is
still running: SIGTERM to its group, then SIGKILL after a grace period; `kill_all_now()` is the
synchronous last resort for when the event loop itself is gone.
"""

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

CLI_MODULE = "entrypoints.cli"
_POLL_S = 0.05


class DemoError(Exception):
    """The demo could not run as planned (a process failed to start, a phase timed out)."""


@attrs.define(eq=False)
class Child:
    name: str
    process: asyncio.subprocess.Process
    log_path: Path
    signalled: str | None = None  # "SIGKILL" / "SIGTERM" once the demo sent one on purpose

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Children:
    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self.all: list[Child] = []

    async def spawn(
        self,
        name: str,
        args: Sequence[str],
        env: Mapping[str, str],
        module: str = CLI_MODULE,
    ) -> Child:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self._log_dir / f"{name}.log"
        with log_path.open("wb") as log:  # the child keeps its own copy of the descriptor
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                *args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,
            )
        child = Child(name, process, log_path)
        self.all.append(child)
        return child

    async def wait_for_line(self, child: Child, pattern: str, timeout_s: float) -> re.Match[str]:
        """The first match of `pattern` in the child's output. Raises DemoError if the child
        exits first or nothing matches within `timeout_s`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                found = regex.search(child.log_path.read_text(errors="replace"))
            except OSError:
                found = None
            if found:
                return found
            if not child.running:
                raise DemoError(
                    f"{child.name} exited with code {child.process.returncode} before it was "
                    f"ready; its last output:\n{child.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise DemoError(
                    f"{child.name} was not ready after {timeout_s:.0f}s; its last output:\n"
                    f"{child.log_tail()}"
                )
            await asyncio.sleep(_POLL_S)

    def send(self, child: Child, sig: signal.Signals) -> None:
        child.signalled = sig.name
        _signal_group(child, sig)

    async def wait(self, child: Child, timeout_s: float) -> int | None:
        """The exit code, or None if still running after `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                return await child.process.wait()
        except TimeoutError:
            return None

    async def close(self, grace_s: float = 10.0, order: Sequence[Child] = ()) -> None:
        """End every running child: those in `order` first (one after the other), then the
        rest together; each gets SIGTERM, then SIGKILL after `grace_s`."""
        first = [c for c in order if c.running]
        rest = [c for c in self.all if c.running and c not in first]
        for group in (first, rest):
            for child in group:
                _signal_group(child, signal.SIGTERM)
            await asyncio.gather(*(self._reap(child, grace_s) for child in group))

    async def _reap(self, child: Child, grace_s: float) -> None:
        if await self.wait(child, grace_s) is None:
            _signal_group(child, signal.SIGKILL)
            await child.process.wait()

    def kill_all_now(self) -> None:
        for child in self.all:
            if child.running:
                _signal_group(child, signal.SIGKILL)


def _signal_group(child: Child, sig: signal.Signals) -> None:
    # The child leads its own process group (start_new_session): its pid is the group id.
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(child.pid, sig)
