"""A `module:attribute` sink loads the way users run the worker: `wsfleet worker` (the console
script, whose own directory is on sys.path, not the working directory) with the module in the
working directory, or in a package on the import path (a directory on PYTHONPATH here, which
the import system searches as it does site-packages, where `pip install` puts one)."""

import signal
from pathlib import Path

import pytest

from entrypoints.devstack.process import Process
from tests.e2e.cli_process import command
from tests.e2e.worker_process import FAST, base_env

# A sink that says it was made: the marker is the evidence it loaded, not the exit code alone.
SINK = """
import os
from pathlib import Path


class Sink:
    max_batch = 10
    max_message_bytes = 1024

    async def write(self, messages):
        return None

    async def resume_point(self, connection_id, checkpoint_seq):
        return None


def create():
    Path(os.environ["LOADED_MARKER"]).write_text(__name__)
    return Sink()
"""


@pytest.mark.parametrize("where", ["working directory", "package on the path"])
async def test_wsfleet_worker_loads_a_sink_of_ones_own(tmp_path: Path, where: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    marker = tmp_path / "loaded"
    env = base_env({**FAST, "LOADED_MARKER": str(marker)})
    if where == "working directory":
        (run_dir / "team_sink.py").write_text(SINK)
        env["WSFLEET_MESSAGE_SINK"] = "team_sink:create"
        expected = "team_sink"
    else:
        package = tmp_path / "site" / "teampkg"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "sinks.py").write_text(SINK)
        env["PYTHONPATH"] += f":{tmp_path / 'site'}"
        env["WSFLEET_MESSAGE_SINK"] = "teampkg.sinks:create"
        expected = "teampkg.sinks"
    argv = command(["worker", "--name", "w1", "--health-port", "0"])
    worker = await Process("worker", argv, run_dir, env, cwd=run_dir, merged=True).start()
    try:
        await worker.wait_for_line(r"worker starting", 30)  # ProcessError if it exits first
        worker.signal(signal.SIGTERM)
        code = await worker.wait(20)
    finally:
        await worker.kill()

    assert code == 0, worker.tail()
    assert marker.read_text() == expected
