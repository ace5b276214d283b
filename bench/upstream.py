"""The upstream simulator of the benchmarks: the dev stack's (entrypoints/devstack/simulator.py)
with a replay buffer deep enough for a takeover at the highest rates benchmarked."""

import ssl
from pathlib import Path

from entrypoints.devstack.simulator import SimulatorProcess

__all__ = ["SimulatorProcess", "simulator"]
BUFFER = ("--buffer", "100000")


def simulator(
    log_dir: Path,
    *,
    rate: float,
    name: str = "simulator",
    certfile: Path | None = None,
    keyfile: Path | None = None,
    client_context: ssl.SSLContext | None = None,
) -> SimulatorProcess:
    return SimulatorProcess(
        log_dir,
        rate=rate,
        name=name,
        args=BUFFER,
        certfile=certfile,
        keyfile=keyfile,
        client_context=client_context,
    )
