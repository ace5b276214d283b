"""Which worker process holds which upstream connection, read from Linux's /proc.

The simulator records each subscriber's remote address ("127.0.0.1:<port>"). A sampler thread
maps, every few tens of milliseconds, the local port of every TCP socket a worker process has
open to the simulator's port (/proc/<pid>/fd gives the socket inodes, /proc/net/tcp their
ports). The judge can then say which worker each subscriber was — including a SIGSTOPped
worker's, whose socket stays open while the process is frozen. A connection that lives less
than one sampling period may go unseen: it is then reported as unattributed, never guessed.
"""

import os
import threading
import time
from pathlib import Path

import attrs

PROC_TCP = Path("/proc/net/tcp")
_LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex)


def available() -> bool:
    return PROC_TCP.exists() and Path(f"/proc/{os.getpid()}/fd").is_dir()


@attrs.define
class Sighting:
    owner: str  # the harness's name of the worker process
    first_ms: int
    last_ms: int


class SocketOwners:
    def __init__(self, remote_port: int, interval_s: float = 0.1) -> None:
        self._remote_port = remote_port
        self._interval_s = interval_s
        self._pids: dict[int, str] = {}
        self._seen: dict[int, list[Sighting]] = {}  # local port -> sightings, oldest first
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="socket-owners", daemon=True)
        self._needle = f" {_LOOPBACK}:{remote_port:04X} "  # as the remote address column

    def watch(self, pid: int, owner: str) -> None:
        with self._lock:
            self._pids[pid] = owner

    def forget(self, pid: int) -> None:
        with self._lock:
            self._pids.pop(pid, None)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def owner_of(self, remote: str, connected_ms: int, disconnected_ms: int | None) -> str | None:
        """The worker that held the subscriber `remote` ("host:port") during its lifetime."""
        port = int(remote.rsplit(":", 1)[1])
        end = disconnected_ms if disconnected_ms is not None else int(time.time() * 1000)
        with self._lock:
            sightings = list(self._seen.get(port, ()))
        for s in reversed(sightings):
            if s.first_ms <= end + 50 and s.last_ms >= connected_ms - 50:
                return s.owner
        return None

    def sample(self) -> None:
        with self._lock:
            pids = dict(self._pids)
        if not pids:
            return
        ports = self._ports_by_inode()
        now = int(time.time() * 1000)
        found: list[tuple[int, str]] = []
        for pid, owner in pids.items():
            for inode in _socket_inodes(pid):
                port = ports.get(inode)
                if port is not None:
                    found.append((port, owner))
        with self._lock:
            for port, owner in found:
                sightings = self._seen.setdefault(port, [])
                last = sightings[-1] if sightings else None
                if last is not None and last.owner == owner and now - last.last_ms < 1_000:
                    last.last_ms = now
                else:
                    sightings.append(Sighting(owner, now, now))

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def _ports_by_inode(self) -> dict[str, int]:
        """inode -> local port of every IPv4 TCP socket connected to 127.0.0.1:<remote_port>.
        The table may hold thousands of lines (a benchmark's sockets) and is read many times a
        second: only the lines naming the remote address are split."""
        try:
            table = PROC_TCP.read_text()
        except OSError:
            return {}
        result: dict[str, int] = {}
        at = table.find(self._needle)
        while at >= 0:
            start = table.rfind("\n", 0, at) + 1
            end = table.find("\n", at)
            fields = table[start : end if end >= 0 else None].split()
            # sl, local, remote, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode
            if len(fields) > 9:
                result[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
            at = table.find(self._needle, at + 1)
        return result


def local_ports(pid: int, remote_port: int) -> set[int]:
    """The local ports of `pid`'s TCP sockets connected to 127.0.0.1:`remote_port` now."""
    owners = SocketOwners(remote_port)
    ports = owners._ports_by_inode()
    return {ports[inode] for inode in _socket_inodes(pid) if inode in ports}


def _socket_inodes(pid: int) -> list[str]:
    inodes: list[str] = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # the process is gone
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.append(target[8:-1])
    return inodes
