"""Worker processes for end-to-end tests: `python -m entrypoints.worker` as a real subprocess,
its output in files (never an unread pipe that could fill and block it), its health endpoint
polled over HTTP, signals sent by pid."""

import asyncio
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from entrypoints.devstack.service import free_port

ROOT = Path(__file__).parents[2]

# Short timings (the lease stays long enough that a takeover within a couple of seconds can
# only be the graceful handoff, never an expiry).
FAST = {
    "WSFLEET_LEASE_MS": "10000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "1",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "3000",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    "WSFLEET_RECONCILE_INTERVAL_S": "30",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_CAPACITY_PAUSE_S": "0.5",
    "WSFLEET_SHUTDOWN_BUDGET_S": "6",
    "WSFLEET_INGEST_FLUSH_INTERVAL_S": "0.1",
    "WSFLEET_METRICS_INTERVAL_S": "2",
    "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": "1",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
}


def base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WSFLEET_")}
    env.update(extra)
    env["PYTHONPATH"] = str(ROOT)
    return env


class WorkerProcess:
    def __init__(self, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.health_port = free_port()
        self.env = base_env({**env, "WSFLEET_HEALTH_PORT": str(self.health_port)})
        self.stdout = log_dir / f"{name}.out"
        self.stderr = log_dir / f"{name}.err"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "entrypoints.worker",
                env=self.env,
                cwd=ROOT,
                stdout=out,
                stderr=err,
            )

    async def wait_healthy(self, timeout_s: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.returncode is not None:
                raise AssertionError(f"{self.name} exited early:\n{self.output()}")
            status, body = await self.get("/healthz")
            if status == 200:
                health: dict[str, Any] = body
                return health
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.name} never became healthy:\n{self.output()}")

    async def get(self, path: str) -> tuple[int, Any]:
        return await asyncio.to_thread(_get, f"http://127.0.0.1:{self.health_port}{path}")

    def signal(self, sig: signal.Signals = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    async def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    async def stop(self) -> None:
        """Teardown: kill whatever is still running."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    def output(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.stdout.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"unparsed": line})
        return lines


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
    except (urllib.error.URLError, OSError):
        return 0, None
