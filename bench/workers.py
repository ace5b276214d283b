"""Worker processes of a benchmarked fleet: started with the backend's command and the bench
timings, watched through their health endpoint (`/status` lists the connections they hold)."""

import asyncio
import time
from pathlib import Path

from bench import http
from bench.backends import Backend
from bench.procs import Child, child_env, free_port
from bench.timings import BENCH_CONFIG, worker_env


class WorkerProcess:
    def __init__(self, name: str, backend: Backend, log_dir: Path, max_connections: int) -> None:
        self.name = name
        self.health_port = free_port()
        env = {
            **worker_env(BENCH_CONFIG),
            **backend.worker_env(),
            "WSFLEET_MAX_CONNECTIONS": str(max_connections),
            "WSFLEET_HEALTH_PORT": str(self.health_port),
            "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
            "WSFLEET_LOG_LEVEL": "INFO",
        }
        self.child = Child(name, backend.worker_argv(), child_env(env), log_dir)

    async def start(self) -> "WorkerProcess":
        await self.child.start()
        return self

    async def wait_healthy(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.child.running:
                raise RuntimeError(f"{self.name} exited early:\n{self.child.tail()}")
            status, _ = await http.get(self._url("/healthz"), 2.0)
            if status == 200:
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{self.name} never became healthy:\n{self.child.tail()}")

    async def held(self) -> list[str]:
        """The connections this worker streams now (empty if it does not answer)."""
        status, body = await http.get(self._url("/status"), 2.0)
        if status not in (200, 503) or not isinstance(body, dict):
            return []
        return [c["connection_id"] for c in body.get("connections", []) if c["upstream_open"]]

    def _url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.health_port}{path}"
