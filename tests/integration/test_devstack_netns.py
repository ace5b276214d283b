"""The dev stack's hosts on one machine (entrypoints/devstack/netns.py): PostgreSQL and the
upstream simulator each in a namespace of their own, two worker hosts joined to both by LANs
of their own. Cutting one host's database link drops its packets to PostgreSQL (a timeout, not
a refusal) while its path to the upstream and the other host's to the database stay up; and
whatever ends the block, no namespace, interface or process of it is left."""

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from entrypoints.devstack import netns
from entrypoints.devstack.netns import HERE, Network
from entrypoints.devstack.postgres import locate, open_local_postgres
from entrypoints.devstack.simulator import SimulatorProcess
from tests.support import postgres as postgres_support
from tests.support.netns import missing_namespaces, require_namespaces

LAYOUT = {"db": ("w1", "w2", HERE), "up": ("w1", "w2", HERE)}
# Connects once and says how it went: "connected", "timeout" (the packets went nowhere) or the
# error (refused, unreachable: the network answered).
PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.5).close()\n"
    "    print('connected')\n"
    "except TimeoutError:\n"
    "    print('timeout')\n"
    "except OSError as exc:\n"
    "    print(type(exc).__name__, exc)\n"
)


async def connect_from(net: Network, host: str, address: str, port: int) -> str:
    def probe() -> str:
        argv = [*net.launcher(host), sys.executable, "-c", PROBE, address, str(port)]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    return await asyncio.to_thread(probe)


async def test_a_cut_database_link_drops_its_packets_while_the_upstream_path_stays_up(
    tmp_path: Path,
) -> None:
    require_namespaces()
    if isinstance(found := locate(), str):
        postgres_support.missing_server(found)
    async with netns.open_network(LAYOUT) as net:
        db, up = net.address("db", "db"), net.address("up", "up")
        async with open_local_postgres(tmp_path, host=db, launcher=net.launcher("db")) as pg:
            sim = SimulatorProcess(tmp_path, rate=10.0, host=up, launcher=net.launcher("up"))
            await sim.start()
            try:
                assert sim.base_url == f"ws://{up}:{sim.port}"
                assert await _select_one(pg.url()) == 1  # a password login from a LAN host
                for host in ("w1", "w2", HERE):
                    assert await connect_from(net, host, db, pg.port) == "connected", host
                    assert await connect_from(net, host, up, sim.port) == "connected", host

                await asyncio.to_thread(net.cut, "w1", "db")
                assert await connect_from(net, "w1", db, pg.port) == "timeout"
                assert await connect_from(net, "w1", up, sim.port) == "connected"
                assert await connect_from(net, "w2", db, pg.port) == "connected"
                assert await connect_from(net, HERE, db, pg.port) == "connected"

                await asyncio.to_thread(net.restore, "w1", "db")
                assert await connect_from(net, "w1", db, pg.port) == "connected"
            finally:
                await sim.stop()


def test_everything_is_removed_whatever_ends_the_block() -> None:
    """GIVEN a network with a process left running inside one of its hosts, WHEN the block
    ends by KeyboardInterrupt, THEN its namespaces, its interfaces here and the process are
    gone."""
    require_namespaces()
    seen: dict[str, Any] = {}
    with pytest.raises(KeyboardInterrupt):
        interrupted_inside(seen)
    sleeper: subprocess.Popen[bytes] = seen["sleeper"]
    assert sleeper.wait(10) == -signal.SIGKILL
    listed = _ip("netns", "list")
    assert not [name for name in seen["namespaces"] if name in listed]
    assert seen["interfaces"]
    here = _ip("-o", "link", "show")
    assert not [name for name in seen["interfaces"] if f" {name}@" in here]


def interrupted_inside(seen: dict[str, Any]) -> None:
    with netns.network({"db": ("w1", HERE)}) as net:
        seen["sleeper"] = subprocess.Popen([*net.launcher("w1"), "sleep", "600"])
        seen["namespaces"] = list(net.namespaces.values())
        seen["interfaces"] = net.here_interfaces()
        assert set(seen["namespaces"]) <= set(_ip("netns", "list").split())
        assert all(f" {name}@" in _ip("-o", "link", "show") for name in seen["interfaces"])
        raise KeyboardInterrupt


def test_a_name_that_cannot_make_an_interface_name_is_refused() -> None:
    with pytest.raises(ValueError, match="'database1': 1-8 of a-z 0-9"):
        netns.network({"database1": ("w1",)}).__enter__()
    with pytest.raises(ValueError, match="serves it"):
        netns.network({"db": ("db",)}).__enter__()


async def _select_one(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT 1"))
    finally:
        await conn.close()


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


def test_the_namespaces_of_a_run_whose_process_is_gone_are_removed_by_the_next() -> None:
    require_namespaces()
    ended = subprocess.Popen(["true"])
    ended.wait()
    stale = f"wsf-{ended.pid}-abcd-w1"
    _ip("netns", "add", stale)
    try:
        with netns.network({"db": ("w1",)}):
            assert stale not in _ip("netns", "list").split()
    finally:
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True, check=False)


def test_under_ci_a_root_that_cannot_make_namespaces_fails_and_not_root_skips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(pytest.fail.Exception, match=r"CI=true, running as root.*no netns here"):
        missing_namespaces("no netns here")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception, match="cannot be made here: needs root"):
        missing_namespaces("needs root")
    monkeypatch.delenv("CI")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(pytest.skip.Exception, match="no netns here"):
        missing_namespaces("no netns here")
