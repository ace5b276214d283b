"""Hosts on one machine: network namespaces joined by LANs of their own, for runs that need
real multi-host faults (a link cut while the host's other links stay up).

A LAN is a bridge inside the namespace of the host that serves it (the database's, the
upstream's), at the first address of a /24 of 10.231.0.0/16 that nothing here uses. Each other
host joins it by a veth pair whose bridge-side end (its port) lives in the serving namespace:
`cut` sets that port down, and the host's packets to that LAN are dropped without an error, as
a partition looks to TCP, while its other LANs stay up. This process's own namespace (`HERE`)
joins a LAN the same way, to reach the servers and the hosts as a judge.

Names carry the run's id (namespaces `wsf-<pid>-<hex>-<host>`, this namespace's interfaces
`wf<hex><lan>`), so parallel runs never meet. Everything is removed when the block ends,
whatever ends it (an exception, KeyboardInterrupt), the processes left inside first; the
namespaces of a run whose process is gone (SIGKILLed) are removed by the next run.
Needs root and iproute2's `ip` (no iptables): `unavailable()` says why not.
"""

import asyncio
import contextlib
import fcntl
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import attrs

from entrypoints.devstack.process import alive

HERE = "here"  # this process's namespace, as a member of a LAN
SUPERNET = ipaddress.IPv4Network("10.231.0.0/16")
SERVER, HERE_HOST, FIRST_MEMBER = 1, 2, 11  # host numbers within a LAN's /24
# Host and LAN names end up in interface names, whose limit is 15 characters. Every `ip`
# command names its device after `dev`: a device named like a keyword ("up") is then no trap.
_NAME = re.compile(r"[a-z][a-z0-9]{0,7}\Z")
_OURS = re.compile(r"wsf-(\d+)-[0-9a-f]{4}-[a-z0-9]+\Z")
_LOCK = Path(tempfile.gettempdir()) / "wsfleet-netns.lock"


class NetnsError(Exception):
    """A namespace, link or address could not be made or changed (with `ip`'s own words)."""


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None if they can (by making one)."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return f"making network namespaces needs root (this is uid {os.geteuid()})"
    probe = f"wsf-{os.getpid()}-{secrets.token_hex(2)}-probe"
    try:
        _ip("netns", "add", probe)
    except NetnsError as exc:
        return str(exc)
    _ip("netns", "delete", probe)
    return None


@attrs.define(eq=False)
class Network:
    run_id: str  # "<pid>-<hex>"
    lans: dict[str, ipaddress.IPv4Network]  # LAN (and the host serving it) -> its /24
    members: dict[str, tuple[str, ...]]  # LAN -> the hosts that join it, in address order
    namespaces: dict[str, str]  # host -> its namespace

    def namespace(self, host: str) -> str:
        return self.namespaces[host]

    def address(self, host: str, lan: str) -> str:
        """`host`'s address on `lan` (the server's when `host` is the LAN's own)."""
        if host == lan:
            number = SERVER
        elif host == HERE:
            number = HERE_HOST
        else:
            number = FIRST_MEMBER + [m for m in self.members[lan] if m != HERE].index(host)
        return str(self.lans[lan][number])

    def launcher(self, host: str) -> list[str]:
        """The argv prefix that runs a command on `host` (it execs: the pid stays the same)."""
        return [] if host == HERE else ["ip", "netns", "exec", self.namespace(host)]

    def cut(self, host: str, lan: str) -> None:
        """`host`'s link to `lan` drops every packet from now on (its port set down)."""
        _ip("-n", self.namespace(lan), "link", "set", "dev", _port(host), "down")

    def restore(self, host: str, lan: str) -> None:
        _ip("-n", self.namespace(lan), "link", "set", "dev", _port(host), "up")

    def here_interfaces(self) -> list[str]:
        return [self._interface(HERE, lan) for lan, hosts in self.members.items() if HERE in hosts]

    def _interface(self, host: str, lan: str) -> str:
        return f"wf{self.run_id.rsplit('-', 1)[1]}{lan}" if host == HERE else f"to-{lan}"


@contextmanager
def network(lans: Mapping[str, Sequence[str]]) -> Iterator[Network]:
    """Makes the namespaces and LANs, yields them, then removes them. `lans`: for each LAN
    (served by the host of the same name), the hosts that join it; `HERE` is this process.
    Raises ValueError for a bad name, NetnsError if `ip` refuses."""
    for name in {*lans, *(h for hosts in lans.values() for h in hosts)} - {HERE}:
        if not _NAME.match(name):
            raise ValueError(f"host or LAN name {name!r}: 1-8 of a-z 0-9, a letter first")
    if any(lan in hosts for lan, hosts in lans.items()):
        raise ValueError("a LAN's own host serves it; it does not join it")
    hosts = list(dict.fromkeys([*lans, *(h for hs in lans.values() for h in hs if h != HERE)]))
    _sweep()
    run_id = f"{os.getpid()}-{secrets.token_hex(2)}"
    net = Network(
        run_id,
        lans={},
        members={lan: tuple(members) for lan, members in lans.items()},
        namespaces={host: f"wsf-{run_id}-{host}" for host in hosts},
    )
    try:
        for host in hosts:
            _ip("netns", "add", net.namespace(host))
            _ip("-n", net.namespace(host), "link", "set", "dev", "lo", "up")
        with _allocation_lock():
            for lan, subnet in zip(lans, _free_subnets(len(lans)), strict=True):
                net.lans[lan] = subnet
                _make_lan(net, lan)
        yield net
    finally:
        _remove(net)


@asynccontextmanager
async def open_network(lans: Mapping[str, Sequence[str]]) -> AsyncIterator[Network]:
    """`network` for an event loop: making and removing it runs `ip` many times, on a thread."""
    manager = network(lans)
    net = await asyncio.to_thread(manager.__enter__)
    try:
        yield net
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


def _make_lan(net: Network, lan: str) -> None:
    ns, bridge, length = net.namespace(lan), f"br-{lan}", net.lans[lan].prefixlen
    _ip("-n", ns, "link", "add", "name", bridge, "type", "bridge")
    _ip("-n", ns, "addr", "add", f"{net.address(lan, lan)}/{length}", "dev", bridge)
    _ip("-n", ns, "link", "set", "dev", bridge, "up")
    for host in net.members[lan]:
        where = [] if host == HERE else ["-n", net.namespace(host)]
        end = net._interface(host, lan)
        veth = ["type", "veth", "peer", "name", _port(host), "netns", ns]
        _ip(*where, "link", "add", "name", end, *veth)
        _ip("-n", ns, "link", "set", "dev", _port(host), "master", bridge, "up")
        _ip(*where, "addr", "add", f"{net.address(host, lan)}/{length}", "dev", end)
        _ip(*where, "link", "set", "dev", end, "up")


def _port(host: str) -> str:
    return f"p-{host}"


def _remove(net: Network) -> None:
    """Everything of `net` that exists, errors ignored: this runs after a failed setup too."""
    for interface in net.here_interfaces():
        with contextlib.suppress(NetnsError):
            _ip("link", "delete", "dev", interface)
    for namespace in net.namespaces.values():
        _delete_namespace(namespace)


def _delete_namespace(namespace: str) -> None:
    # A process still inside keeps the namespace (and its links) alive after the delete: it
    # can only be a child of the run that made it.
    with contextlib.suppress(NetnsError):
        for pid in _ip("netns", "pids", namespace).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    with contextlib.suppress(NetnsError):
        _ip("netns", "delete", namespace)


def _sweep() -> None:
    """Removes the namespaces of runs whose process is gone."""
    for line in _ip("netns", "list").splitlines():
        name = line.split(" ", 1)[0]
        found = _OURS.match(name)
        if found and not alive(int(found[1])):
            _delete_namespace(name)


@contextmanager
def _allocation_lock() -> Iterator[None]:
    """Held from choosing subnets until this namespace has its addresses in them."""
    with _LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _free_subnets(count: int) -> list[ipaddress.IPv4Network]:
    used = []
    for line in _ip("-4", "-o", "addr", "show").splitlines():
        used.append(ipaddress.IPv4Interface(line.split()[3]).network)
    for line in _ip("-4", "route", "show").splitlines():
        for word in line.split()[:2]:  # "10.1.0.0/16 dev ...", "blackhole 10.2.0.0/16"
            with contextlib.suppress(ValueError):
                used.append(ipaddress.IPv4Network(word, strict=False))
                break
    free = [s for s in SUPERNET.subnets(new_prefix=24) if not any(s.overlaps(u) for u in used)]
    if len(free) < count:
        raise NetnsError(f"fewer than {count} free /24 subnets in {SUPERNET}")
    # At random: a run elsewhere (another machine's namespaces, a container) that picks
    # without looking here is less likely to pick the same.
    return secrets.SystemRandom().sample(free, count)


def _ip(*args: str) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result.stdout
