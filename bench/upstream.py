"""The upstream simulator as a separate process (`python -m entrypoints.simulator`), and its
records: who subscribed to each stream and when (its own wall clock, epoch ms), what it sent."""

import ssl
from pathlib import Path
from typing import Any

from bench import http
from bench.procs import Child, child_env


class SimulatorProcess:
    def __init__(
        self,
        log_dir: Path,
        *,
        rate: float,
        name: str = "simulator",
        certfile: Path | None = None,
        keyfile: Path | None = None,
        client_context: ssl.SSLContext | None = None,
    ) -> None:
        args = ["--port", "0", "--rate", str(rate), "--buffer", "100000"]
        if certfile is not None and keyfile is not None:
            args += ["--certfile", str(certfile), "--keyfile", str(keyfile)]
        self.child = Child.python(name, "entrypoints.simulator", args, child_env({}), log_dir)
        self.base_url = ""  # ws://127.0.0.1:PORT (wss:// with a certificate)
        self._context = client_context  # trusts the certificate, for https:// records

    async def start(self) -> "SimulatorProcess":
        await self.child.start()
        self.base_url = await self.child.wait_for_url()
        return self

    async def stop(self) -> None:
        await self.child.stop()

    @property
    def http_url(self) -> str:
        return "http" + self.base_url.removeprefix("ws")  # https:// for wss://

    def url(self, stream_id: str) -> str:
        return f"{self.base_url}/stream/{stream_id}"

    async def records(self, timeout_s: float = 60.0) -> dict[str, Any]:
        status, body = await http.get(f"{self.http_url}/records", timeout_s, self._context)
        if status != 200:
            raise RuntimeError(f"simulator /records answered {status}: {str(body)[:200]}")
        streams: dict[str, Any] = body["streams"]
        return streams
