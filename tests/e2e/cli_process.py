"""`wsfleet` as a real subprocess: one-shot commands (`run_cli`) and long-running ones
(`cli_process`: the dev stack's Process, entrypoints/devstack/process.py, with one log file in
the test's directory)."""

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from entrypoints.devstack.process import Process
from tests.e2e.worker_process import base_env

SCRIPT = Path(sys.executable).with_name("wsfleet")


def command(args: Sequence[str]) -> list[str]:
    """The installed console script when there is one (it is what users run), else `-m`."""
    if SCRIPT.exists():
        return [str(SCRIPT), *args]
    return [sys.executable, "-m", "entrypoints.cli", *args]


def run_cli(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(args),
        cwd=cwd,
        env=base_env(env or {}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def cli_process(name: str, args: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Process:
    """`wsfleet <args>` run in `cwd`, its output in `cwd/<name>.log`."""
    return Process(name, command(args), cwd, base_env(env), cwd=cwd, merged=True)
