"""`wsfleet messages` imports only what a read needs: not the worker, the API, the dev tooling,
dependency-injector's containers or another backend's adapters (issue 30: the first page of a
long stream within a second of the prompt, most of which went to importing those).

No timing here (that is `python -m bench --only read-back`): each backend's command runs as a
real process, as far as its backend lets it on this machine (the embedded one reads a data
directory that has no such connection; aws and postgres are pointed at a closed port and fail
to connect, after opening their read side), and the modules it imported are checked against
a list. Someone adding an eager import back to this path makes it fail, naming the module.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.worker_process import base_env

# Runs the command in-process, then prints what it imported (after the command's own output).
PROBE = """
import json, sys
from entrypoints.cli.main import main
code = main(sys.argv[1:])
print("MODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# Never on a read's path, whatever the backend: the composition roots and what they wire.
EVERY_BACKEND = (
    "dependency_injector",
    "aioboto3",
    "boto3",
    "websockets",
    "rich",
    "aiohttp.web",
    "entrypoints.containers",
    "entrypoints.embedded",
    "entrypoints.postgres",
    "entrypoints.worker",
    "entrypoints.worker_main",
    "entrypoints.api.app",
    "entrypoints.simulator",
    "entrypoints.demo",
    "entrypoints.devstack",
    "application.worker",
    "adapters.faults",
    "adapters.websocket.connector",
    "adapters.sqs.queue",
    "adapters.cloudwatch.metrics",
    "adapters.prometheus",
    "adapters.dynamodb.message_sink",
    "adapters.kinesis.message_sink",
)
NOT_AWS = ("botocore", "aiobotocore", "aiohttp", "adapters.dynamodb.connection_store")
NOT_EMBEDDED = ("adapters.sqlite.store", "adapters.sqlite.message_sink")
NOT_POSTGRES = ("asyncpg", "adapters.postgres.db")
CLOSED = "127.0.0.1:9"  # the discard port: nothing listens there

BACKENDS = {
    "embedded": ({}, (*NOT_AWS, *NOT_POSTGRES), "was never started"),
    "aws": (
        {
            "WSFLEET_BACKEND": "aws",
            "WSFLEET_REGION": "us-east-1",
            "WSFLEET_AWS_ENDPOINT_URL": f"http://{CLOSED}",
            "WSFLEET_AWS_MAX_ATTEMPTS": "1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        },
        (*NOT_EMBEDDED, *NOT_POSTGRES),
        "Could not connect",
    ),
    "postgres": (
        {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": f"postgresql://u@{CLOSED}/db"},
        (*NOT_AWS, *NOT_EMBEDDED),
        "PostgreSQL",
    ),
}


def imported_by(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, list[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env=base_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    found = json.loads(line.removeprefix("MODULES "))
    return found["code"], found["modules"], done.stderr


def heavy(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_messages_imports_no_container_worker_or_other_backend(
    backend: str, tmp_path: Path
) -> None:
    env, others, failure = BACKENDS[backend]
    (tmp_path / ".wsfleet").mkdir(mode=0o700)

    code, modules, stderr = imported_by(["messages", "feed"], env, tmp_path)

    assert code == 1, stderr
    assert failure in stderr  # it got as far as reading the backend
    assert f"entrypoints.read_side.{backend}" in modules
    assert heavy(modules, EVERY_BACKEND + others) == []


# `status` and `history` print tables (rich) and tell a session id by the worker's separator
# (application.worker.session_keeper), but load no worker, container or client either.
TABLES = (
    *(f for f in EVERY_BACKEND if f not in ("rich", "application.worker")),
    "application.worker.worker",
    "application.worker.loops",
    *NOT_AWS,
    *NOT_POSTGRES,
)


@pytest.mark.parametrize("args", [["status"], ["history", "feed"], ["history", "w1#1"]])
def test_status_and_history_import_no_container_or_worker(args: list[str], tmp_path: Path) -> None:
    (tmp_path / ".wsfleet").mkdir(mode=0o700)

    code, modules, stderr = imported_by(args, {}, tmp_path)

    assert code in (0, 1), stderr  # an empty fleet: nothing listed, or nothing of that id
    assert "entrypoints.read_side.embedded" in modules
    assert heavy(modules, TABLES) == []
