"""One local process of a dev stack, for event loops: a worker, the upstream simulator, the
local API, the CLI. Written once for the demo, the benchmarks, the chaos suite and the e2e tests.

- Output goes to files (never a pipe nobody reads, which would block the child once full):
  `<name>.out` and `<name>.err`, or one `<name>.log` with both (`merged`).
- On Linux the kernel kills the child if this process dies first (an interrupted run leaves
  nothing behind; service.py's wrapper, whose exec keeps the pid).
- `own_session`: the child leads a session and process group of its own, so a Ctrl-C in the
  terminal reaches only the parent, and a signal sent to the child reaches its whole group.
- Every wait has a deadline; a child that exits or stays silent raises ProcessError with the
  tail of its output."""

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from entrypoints.devstack.service import ROOT
from entrypoints.parent_death import dying_with_parent

_POLL_S = 0.05
# What a server child prints once it serves (the simulator, the local API, moto).
URL_LINE = r"(?:listening on|serving on) (\S+://\S+)"


class ProcessError(AssertionError):
    """A child did not do what was waited for (it exited, or nothing came in time). An
    AssertionError, so that a test that waits on a child reads as a failed test."""


class Process:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | None = ROOT,
        merged: bool = False,
        own_session: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = None if env is None else dict(env)
        self.cwd = cwd
        self.own_session = own_session
        self.stdout = log_dir / (f"{name}.log" if merged else f"{name}.out")
        self.stderr = None if merged else log_dir / f"{name}.err"
        self.process: asyncio.subprocess.Process | None = None
        self.signalled: str | None = None  # a fault a run injected on purpose ("SIGKILL")
        self._offset = 0
        self._lines: list[dict[str, Any]] = []

    @classmethod
    def python(
        cls,
        name: str,
        module: str,
        args: Sequence[str],
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> "Process":
        """`python -m <module> <args>` on this interpreter."""
        return cls(name, [sys.executable, "-m", module, *args], log_dir, env, **options)

    async def start(self) -> Self:
        self.stdout.parent.mkdir(parents=True, exist_ok=True)
        command = dying_with_parent(self.argv)
        with contextlib.ExitStack() as files:  # the child keeps its own descriptors
            out = files.enter_context(self.stdout.open("wb"))
            err = files.enter_context(self.stderr.open("wb")) if self.stderr else out
            self.process = await asyncio.create_subprocess_exec(
                *command,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if self.stderr is None else err,
                start_new_session=self.own_session,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def signal(self, sig: signal.Signals) -> None:
        """To the child (its whole group when it leads one); nothing if it is gone."""
        if not self.running:
            return
        with contextlib.suppress(ProcessLookupError):
            if self.own_session:
                os.killpg(self.pid, sig)  # it leads its group: its pid is the group id
            else:
                os.kill(self.pid, sig)

    async def wait(self, timeout_s: float) -> int:
        """The exit code; TimeoutError if it still runs after `timeout_s`."""
        assert self.process is not None, f"{self.name} was never started"
        async with asyncio.timeout(timeout_s):
            return await self.process.wait()

    async def exit_code(self, timeout_s: float) -> int | None:
        """The exit code, or None if it still runs after `timeout_s`."""
        try:
            return await self.wait(timeout_s)
        except TimeoutError:
            return None

    async def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s`; reaps the child."""
        if not self.running:
            return
        self.signal(signal.SIGTERM)
        if await self.exit_code(grace_s) is None:
            await self.kill()

    async def kill(self) -> None:
        """SIGKILL (it also ends a SIGSTOPped child) and reap."""
        if self.running:
            self.signal(signal.SIGKILL)
            assert self.process is not None
            await self.process.wait()

    def kill_now(self) -> None:
        """SIGKILL without waiting: the last resort when no event loop is left to reap."""
        if self.running:
            self.signal(signal.SIGKILL)

    async def wait_for_line(self, pattern: str, timeout_s: float = 30.0) -> re.Match[str]:
        """The first match of `pattern` in the child's output (stdout, then stderr). Raises
        ProcessError if the child exits first or nothing matches within `timeout_s`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        while True:
            for path in self._paths():
                found = regex.search(await asyncio.to_thread(_read, path))
                if found:
                    return found
            if not self.running:
                raise ProcessError(
                    f"{self.name} exited with code {self.returncode} before printing "
                    f"{pattern!r}; its last output:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise ProcessError(
                    f"{self.name}: no {pattern!r} after {timeout_s:.0f} s; its last output:\n"
                    f"{self.tail()}"
                )
            await asyncio.sleep(_POLL_S)

    async def wait_for_url(self, timeout_s: float = 30.0) -> str:
        """Where a server child serves: its "listening on <url>" line."""
        return (await self.wait_for_line(URL_LINE, timeout_s))[1]

    def output(self) -> str:
        return "".join(_read(path) for path in self._paths())

    async def log_lines(self) -> list[dict[str, Any]]:
        """The JSON log lines on stdout so far, read incrementally (a line still being
        written is read next time); a line that is not JSON comes as {"unparsed": line}."""
        for line in (await asyncio.to_thread(self._read_new)).splitlines():
            try:
                self._lines.append(json.loads(line))
            except ValueError:
                self._lines.append({"unparsed": line})
        return self._lines

    def _read_new(self) -> str:
        try:
            with self.stdout.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return ""
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        return data[:complete].decode(errors="replace")

    def tail(self, lines: int = 25) -> str:
        parts = []
        for path in self._paths():
            text = "\n".join(_read(path).splitlines()[-lines:]) or "(none)"
            parts.append(f"--- {path.name} (last {lines} lines) ---\n{text}")
        return "\n".join(parts)

    def _paths(self) -> list[Path]:
        return [self.stdout] if self.stderr is None else [self.stdout, self.stderr]


def alive(pid: int) -> bool:
    """Whether process `pid` runs: a zombie (exited, not yet reaped by its parent) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class Processes:
    """The children of one run (the demo's), ended together whatever happens: each
    `python -m <module>` in a session of its own with one log file, so that a Ctrl-C in the
    terminal reaches only the parent, which then ends them in order."""

    def __init__(self, log_dir: Path, module: str = "entrypoints.cli") -> None:
        self._log_dir = log_dir
        self._module = module
        self.all: list[Process] = []

    async def spawn(self, name: str, args: Sequence[str], env: Mapping[str, str]) -> Process:
        child = Process.python(
            name, self._module, args, self._log_dir, env, cwd=None, merged=True, own_session=True
        )
        self.all.append(child)
        return await child.start()

    def send(self, child: Process, sig: signal.Signals) -> None:
        """A signal sent on purpose (a fault): the child remembers it."""
        child.signalled = sig.name
        child.signal(sig)

    async def close(self, grace_s: float = 10.0, order: Sequence[Process] = ()) -> None:
        """End every running child: those in `order` first (one after the other's signal,
        together), then the rest together; each gets SIGTERM, then SIGKILL after `grace_s`."""
        first = [c for c in order if c.running]
        rest = [c for c in self.all if c.running and c not in first]
        for group in (first, rest):
            await asyncio.gather(*(child.stop(grace_s) for child in group))

    def kill_all_now(self) -> None:
        for child in self.all:
            child.kill_now()
