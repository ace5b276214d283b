"""A worker as a process of a dev stack: `python -m entrypoints.worker` (the ECS task's
command) or `wsfleet worker` (the embedded one), its health endpoint on a port of its own,
polled over HTTP (`/healthz`, `/status`)."""

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from application.config import WorkerConfig
from entrypoints.devstack import http
from entrypoints.devstack.process import Process, ProcessError
from entrypoints.devstack.service import child_env, free_port

AWS_WORKER = (sys.executable, "-m", "entrypoints.worker")


def worker_timings(config: WorkerConfig) -> dict[str, str]:
    """A worker's timings as the WSFLEET_* variables it reads them from."""
    return {
        f"WSFLEET_{field.name.upper()}": str(getattr(config, field.name))
        for field in attrs.fields(WorkerConfig)
    }


def embedded_worker(name: str | None = None) -> list[str]:
    """`python -m entrypoints.cli worker [--name NAME]`: what `wsfleet worker` runs."""
    named = ["--name", name] if name else []
    return [sys.executable, "-m", "entrypoints.cli", "worker", *named]


class WorkerProcess(Process):
    def __init__(
        self,
        name: str,
        log_dir: Path,
        env: Mapping[str, str],
        argv: Sequence[str] = AWS_WORKER,
        *,
        health_host: str = "127.0.0.1",
        launcher: Sequence[str] = (),
        **options: Any,
    ) -> None:
        """`env`: the worker's WSFLEET_* settings (and anything else to add to the caller's
        environment, service.child_env); the health port is chosen here, on `health_host`.
        `launcher`: an argv prefix that runs it on another host (`Network.launcher`,
        netns.py), whose address `health_host` then is."""
        self.health_host = health_host
        self.health_port = free_port()
        health = {"WSFLEET_HEALTH_HOST": health_host, "WSFLEET_HEALTH_PORT": str(self.health_port)}
        full = child_env({**env, **health})
        super().__init__(name, [*launcher, *argv], log_dir, full, **options)

    def url(self, path: str) -> str:
        return f"http://{self.health_host}:{self.health_port}{path}"

    async def get(self, path: str, timeout_s: float = 2.0) -> tuple[int, Any]:
        """(status, JSON body) from the health endpoint; status 0 while nothing answers."""
        return await http.get(self.url(path), timeout_s)

    async def wait_healthy(self, timeout_s: float = 30.0, path: str = "/healthz") -> Any:
        """The first 200 answer's body from `path`. Raises ProcessError if the worker exits
        first or does not answer 200 within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise ProcessError(f"{self.name} exited early:\n{self.tail()}")
            status, body = await self.get(path)
            if status == 200:
                return body
            await asyncio.sleep(0.1)
        raise ProcessError(f"{self.name} never became healthy:\n{self.tail()}")

    async def held(self) -> list[str]:
        """The connections this worker streams now (empty if it does not answer)."""
        status, body = await self.get("/status")
        if status not in (200, 503) or not isinstance(body, dict):
            return []
        return [c["connection_id"] for c in body.get("connections", []) if c["upstream_open"]]
