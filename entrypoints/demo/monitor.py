"""What the demo sees while it runs: the store's connections, the simulator's subscribers and
the workers it started, refreshed twice a second into one Snapshot."""

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import attrs

from application.errors import ApplicationError
from application.worker.session_keeper import worker_of
from application.worker_ids import name_of
from domain import NO_OWNER, Connection, LeaseStatus, WorkerSession
from entrypoints.demo.backends import Probe
from entrypoints.devstack import http
from entrypoints.devstack.process import Process

log = logging.getLogger(__name__)

REFRESH_S = 0.5


def worker_name(owner: str) -> str:
    """The name the demo started the owner session's worker with (`w2-1a2b3c4d#1` -> `w2`)."""
    return name_of(worker_of(owner)) if owner != NO_OWNER else ""


@attrs.frozen
class Snapshot:
    at_ms: int
    connections: dict[str, Connection]
    sessions: dict[str, WorkerSession]
    streams: dict[str, dict[str, object]]  # the simulator's records by stream id
    workers: tuple[Process, ...]

    def subscribers(self, connection_id: str) -> int:
        value = self.streams.get(connection_id, {}).get("subscribers", 0)
        return value if isinstance(value, int) else 0

    def held_by(self, connection_id: str) -> str:
        """The worker name holding a live lease on the connection, or ""."""
        conn = self.connections.get(connection_id)
        if conn is None or conn.lease_status(self.at_ms, self.sessions) is not LeaseStatus.HELD:
            return ""
        return worker_name(conn.owner)

    def load(self) -> dict[str, int]:
        """Connections held per worker name."""
        counts: dict[str, int] = {}
        for cid in self.connections:
            name = self.held_by(cid)
            if name:
                counts[name] = counts.get(name, 0) + 1
        return counts


class Monitor:
    def __init__(
        self,
        probe: Probe,
        records_url: str,
        connection_ids: Sequence[str],
        workers: Callable[[], Sequence[Process]],
        on_snapshot: Callable[[Snapshot], None],
    ) -> None:
        self._probe = probe
        self._records_url = records_url
        self._ids = set(connection_ids)
        self._workers = workers
        self._on_snapshot = on_snapshot
        self.latest: Snapshot | None = None
        self._changed = asyncio.Event()

    async def refresh(self) -> Snapshot:
        connections = await self._probe.store.list_connections(limit=10_000)
        sessions = {s.session_id: s for s in await self._probe.store.list_sessions()}
        status, body = await http.call("GET", self._records_url)
        streams = body.get("streams", {}) if status == 200 and isinstance(body, dict) else {}
        snapshot = Snapshot(
            at_ms=time.time_ns() // 1_000_000,
            connections={c.connection_id: c for c in connections if c.connection_id in self._ids},
            sessions=sessions,
            streams={k: v for k, v in streams.items() if k in self._ids},
            workers=tuple(self._workers()),
        )
        self.latest = snapshot
        self._on_snapshot(snapshot)
        self._changed.set()
        self._changed = asyncio.Event()
        return snapshot

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except (ApplicationError, OSError) as exc:  # a slow moment: the next refresh will do
                log.debug("monitor refresh failed: %s", exc)
            await asyncio.sleep(REFRESH_S)

    async def wait_until(
        self, condition: Callable[[Snapshot], bool], timeout_s: float, what: str
    ) -> Snapshot:
        """The first snapshot meeting `condition`. Raises TimeoutError naming `what`."""
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    changed = self._changed
                    if self.latest is not None and condition(self.latest):
                        return self.latest
                    await changed.wait()
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting until {what}") from None
