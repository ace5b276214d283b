"""The upstream simulator as a process of a dev stack (`python -m entrypoints.simulator`), and
its records: who subscribed to each stream and when (its own wall clock, epoch ms), what it
sent. It is the judge's witness: what a subscriber saw, not what a worker says."""

import ssl
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from entrypoints.devstack import http
from entrypoints.devstack.process import Process, ProcessError
from entrypoints.devstack.service import child_env


class SimulatorProcess:
    def __init__(
        self,
        log_dir: Path,
        *,
        rate: float,
        name: str = "simulator",
        args: Sequence[str] = (),
        certfile: Path | None = None,
        keyfile: Path | None = None,
        client_context: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
        launcher: Sequence[str] = (),
    ) -> None:
        """`args`: more of the simulator's flags (`--buffer 100000`); with `certfile` and
        `keyfile` it serves wss:// and `client_context` must trust it. `host`: the address it
        listens on; `launcher`: an argv prefix that runs it on another host
        (`Network.launcher`, netns.py), whose address `host` then is."""
        argv = ["--host", host, "--port", "0", "--rate", str(rate), *args]
        if certfile is not None and keyfile is not None:
            argv += ["--certfile", str(certfile), "--keyfile", str(keyfile)]
        command = [*launcher, sys.executable, "-m", "entrypoints.simulator", *argv]
        self.child = Process(name, command, log_dir, child_env({}))
        self.base_url = ""  # ws://HOST:PORT (wss:// with a certificate)
        self._context = client_context  # trusts the certificate, for https:// records

    async def start(self, timeout_s: float = 30.0) -> "SimulatorProcess":
        await self.child.start()
        self.base_url = await self.child.wait_for_url(timeout_s)
        return self

    async def stop(self) -> None:
        await self.child.stop()

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    @property
    def http_url(self) -> str:
        return "http" + self.base_url.removeprefix("ws")  # https:// for wss://

    def url(self, stream_id: str) -> str:
        return f"{self.base_url}/stream/{stream_id}"

    async def create(self, stream_id: str, rate: float | None = None) -> None:
        """The stream exists from now on: its seq 1 is due before anyone subscribes. `rate`:
        its messages a second, if not the simulator's."""
        query = "" if rate is None else f"?rate={rate}"
        await http.post(f"{self.http_url}/streams/{stream_id}{query}", context=self._context)

    async def end(self, stream_id: str) -> None:
        """Ends the stream normally: its subscribers get the rest, then a close 1000."""
        status, body = await http.post(
            f"{self.http_url}/streams/{stream_id}/end", context=self._context
        )
        if status != 200:
            raise ProcessError(f"simulator end of {stream_id} answered {status}: {body!r:.200}")

    async def records(self, timeout_s: float = 60.0) -> dict[str, Any]:
        status, body = await http.get(f"{self.http_url}/records", timeout_s, self._context)
        if status != 200 or not isinstance(body, dict):
            raise ProcessError(f"simulator /records answered {status}: {str(body)[:200]}")
        streams: dict[str, Any] = body["streams"]
        return streams
