"""One backing service as a child process: its own session (a signal to it reaches nothing
else, a Ctrl-C in the terminal reaches only the parent), output to a log file (never a pipe
nobody reads), killed by the kernel if the parent dies first (Linux), ended by `stop()`.

Synchronous on purpose: a service is started and stopped once per run, from a pytest session
fixture as well as from event loops (which call these through `asyncio.to_thread`)."""

import contextlib
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from entrypoints.parent_death import as_user_dying_with_parent, dying_with_parent

_POLL_S = 0.05


class ServiceError(Exception):
    """A service did not start: it exited, or was not ready in time (the message has its log)."""


ROOT = Path(__file__).resolve().parents[2]  # the repository (bench/ and tests/ live there)
# Fake, static credentials so botocore never looks further (no network, no real account).
# Letters and digits only: DynamoDB Local refuses any other access key id.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
REGION = "us-east-1"


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a local process: the caller's without WSFLEET_* (each child states
    its own; a worker refuses unknown ones) and without asyncio's debug mode (its bookkeeping
    slows the services, workers and benchmarks several times over), with fake AWS credentials
    and region unless set, the repository on the path, then `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WSFLEET_") and k != "PYTHONASYNCIODEBUG"
    }
    env = {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, **env, **(extra or {})}
    env["PYTHONPATH"] = str(ROOT)
    return env


# Ports this process has handed out: never the same one twice. The kernel may return a port
# just closed again, and two workers started together were given one health port: the chaos
# harness then read one worker's id for both and judged the other's streams as unleased.
_GIVEN: set[int] = set()


def free_port() -> int:
    """A port nobody listens on now and that this process has not handed out before (the
    service binds it a moment later; a collision shows as a service that exits early, and the
    caller may retry)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


@attrs.define(eq=False)
class Service:
    name: str
    process: "subprocess.Popen[bytes]"
    log_path: Path
    # What `stop` sends first (PostgreSQL's fast shutdown is SIGINT; SIGTERM waits for clients).
    stop_signal: signal.Signals = signal.SIGTERM

    @classmethod
    def start(
        cls,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        *,
        user: str | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
        launcher: Sequence[str] = (),
    ) -> "Service":
        """`user`: run as that account (with its primary group and no other), for a server
        that refuses to run as root (the caller must be allowed to change user). `launcher`:
        an argv prefix that execs the rest elsewhere, still as the caller (`ip netns exec NS`,
        netns.py): it comes before the change of user, which would take its rights away."""
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{name}.log"
        command = list(argv)
        as_user: dict[str, Any] = {}
        if sys.platform == "linux" and user is not None:
            command = as_user_dying_with_parent(command, user)
        elif user is not None:
            as_user = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}
        else:
            command = dying_with_parent(command)
        command = [*launcher, *command]
        with log_path.open("wb") as log:  # the child keeps its own descriptor
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                start_new_session=True,
                **as_user,
            )
        return cls(name, process, log_path, stop_signal)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def wait_until(self, ready: Callable[[], bool], timeout_s: float) -> None:
        """Polls `ready` until it holds. Raises ServiceError if the process exits first or
        `timeout_s` passes (and then stops it)."""
        deadline = time.monotonic() + timeout_s
        while not ready():
            if not self.running:
                raise ServiceError(
                    f"{self.name} exited with code {self.process.returncode} before it was "
                    f"ready; its last output:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceError(
                    f"{self.name} was not ready after {timeout_s:.0f} s; its last output:\n"
                    f"{self.tail()}"
                )
            time.sleep(_POLL_S)

    def wait_for_line(self, pattern: str, timeout_s: float) -> re.Match[str]:
        regex = re.compile(pattern)
        found: list[re.Match[str]] = []

        def ready() -> bool:
            match = regex.search(self.log_path.read_text(errors="replace"))
            found[:] = [match] if match else []
            return bool(match)

        self.wait_until(ready, timeout_s)
        return found[0]

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s`; always reaps the process."""
        if self.running:
            self._signal(self.stop_signal)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
        self.process.wait()

    def _signal(self, sig: signal.Signals) -> None:
        # The child leads its own process group (start_new_session): its pid is the group id.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])
