"""The postgres backend through the real CLI and the real worker process, on a throwaway
PostgreSQL (tests/support/postgres.py): `wsfleet migrate`, `python -m entrypoints.worker` (the
image's command) streaming from the upstream simulator, and the operator commands on the same
database; a worker refusing an unmigrated database, a missing or malformed URL and a wrong
password, each with exit 2 and never the password."""

import asyncio
import json
import signal
import socket
import sys
import urllib.request
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any
from urllib.parse import urlsplit

import pytest

from adapters.postgres.schema import SCHEMA_VERSION
from application.worker.session_keeper import worker_of
from application.worker_ids import name_of
from entrypoints.cli.main import main
from tests.e2e.cli_process import cli_process, run_cli
from tests.e2e.worker_process import FAST, ROOT, base_env, worker_process

PASSWORD_WORD = "Sekr1t-Pa55"


def backend(url: str) -> dict[str, str]:
    return {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": url}


async def cli(args: list[str], cwd: Path, env: dict[str, str]) -> "CompletedProcess[str]":
    result = await asyncio.to_thread(run_cli, args, cwd, env)
    assert result.returncode == 0, f"wsfleet {' '.join(args)}: {result.stderr}"
    return result


def http_get(url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, json.loads(response.read())


async def until(condition: Any, what: str, timeout_s: float = 30.0) -> None:
    """Polls `condition` (a coroutine function) until it holds."""
    try:
        async with asyncio.timeout(timeout_s):
            while not await condition():  # noqa: ASYNC110 (other processes)
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


async def test_migrate_then_a_worker_streams_and_every_command_sees_it(
    postgres_url: str, tmp_path: Path
) -> None:
    """GIVEN a fresh database, `wsfleet migrate`, the simulator, `wsfleet api` and one image
    worker
    WHEN a connection is STARTed with `wsfleet start`
    THEN the worker streams it, `status`, `messages`, `history` and the API show it, `stop`
    releases it with its checkpoint, and the worker and the API exit 0 on SIGTERM."""
    env = {**FAST, **backend(postgres_url)}
    first = await cli(["migrate"], tmp_path, env)
    again = await cli(["migrate"], tmp_path, env)
    assert first.stdout.strip() == f"schema at version {SCHEMA_VERSION} (was 0)"
    assert again.stdout.strip() == f"schema at version {SCHEMA_VERSION} (was {SCHEMA_VERSION})"

    simulator = await cli_process(
        "simulator", ["simulate-upstream", "--port", "0", "--rate", "20"], tmp_path, {}
    ).start()
    api = await cli_process("api", ["api", "--port", "0"], tmp_path, env).start()
    worker = await worker_process(
        "pg-w1", {**env, "WSFLEET_WORKER_ID": "pg-w1-0"}, tmp_path
    ).start()
    try:
        sim_url = (await simulator.wait_for_line(r"listening on (ws://\S+)")).group(1)
        api_url = (await api.wait_for_line(r"listening on (http://\S+) \(postgres\)")).group(1)
        await worker.wait_healthy()
        started = await cli(["start", "feed", f"{sim_url}/stream/feed", "--json"], tmp_path, env)
        assert json.loads(started.stdout)["result"] == "accepted"

        async def stored() -> list[dict[str, Any]]:
            out = await cli(["messages", "feed", "--json"], tmp_path, env)
            return [json.loads(line) for line in out.stdout.splitlines()]

        async def five_stored() -> bool:
            return len(await stored()) >= 5

        await until(five_stored, "the worker stores feed's messages")
        messages = await stored()
        assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
        assert {worker_of(m["worker_session"]) for m in messages} == {"pg-w1-0"}

        status = json.loads((await cli(["status", "--json"], tmp_path, env)).stdout)
        [view] = status["connections"]
        assert (view["connection_id"], view["lease_status"]) == ("feed", "HELD")
        assert name_of(worker_of(view["owner"])) == "pg-w1"
        [session] = status["sessions"]
        assert (session["session_id"], session["status"]) == (view["owner"], "LIVE")
        code, via_api = await asyncio.to_thread(http_get, f"{api_url}/connections/feed")
        assert (code, via_api["owner"]) == (200, view["owner"])

        history = json.loads((await cli(["history", "feed", "--json"], tmp_path, env)).stdout)
        assert [e["type"] for e in history["events"]][:2] == ["ConnectionStarted", "LeaseAcquired"]

        stopped = await cli(["stop", "feed"], tmp_path, env)
        assert "feed: accepted - STOPPED" in stopped.stdout

        async def released() -> bool:
            logged = await cli(["history", "feed", "--json"], tmp_path, env)
            last: dict[str, Any] = json.loads(logged.stdout)["events"][-1]
            return bool(last["type"] == "LeaseReleased")

        await until(released, "the worker releases feed")
        logged = json.loads((await cli(["history", "feed", "--json"], tmp_path, env)).stdout)
        release = logged["events"][-1]
        assert release["reason"] == "stopped", release
        assert release["checkpoint_seq"] >= 5, release

        for process in (worker, api):
            process.signal(signal.SIGTERM)
            assert await process.wait(15) == 0, process.tail()
    finally:
        for process in (worker, api, simulator):
            await process.kill()


@pytest.mark.parametrize("name", ["embedded", "aws"])
def test_migrate_on_a_backend_without_a_schema_says_so_and_succeeds(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"WSFLEET_BACKEND": name, "WSFLEET_REGION": "eu-west-1"}

    assert main(["migrate"], environ=env) == 0
    assert capsys.readouterr().out == (
        f"nothing to migrate: the {name} backend has no versioned schema\n"
    )


async def run_worker(env: dict[str, str], *command: str) -> tuple[int, str]:
    """A worker process run to its exit: (exit code, stderr)."""
    argv = command or ("-m", "entrypoints.worker")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        env=base_env({**env, "WSFLEET_HEALTH_PORT": "0"}),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, stderr.decode()


@pytest.mark.parametrize(
    "command",
    [("-m", "entrypoints.worker"), ("-m", "entrypoints.cli", "worker")],
    ids=["image-worker", "wsfleet-worker"],
)
async def test_a_worker_refuses_an_unmigrated_database_by_name(
    postgres_url: str, command: tuple[str, ...]
) -> None:
    code, stderr = await run_worker(backend(postgres_url), *command)

    database = postgres_url.rsplit("/", 1)[1]
    assert code == 2, stderr
    assert (
        "WSFLEET_POSTGRES_URL=(hidden): "
        f"PostgreSQL database '{database}' has no wsfleet schema: run `wsfleet migrate`"
    ) in stderr
    assert "Traceback" not in stderr


async def test_a_missing_malformed_or_refused_url_exits_2_without_the_password(
    postgres_url: str,
) -> None:
    password = urlsplit(postgres_url).password
    assert password
    wrong = postgres_url.replace("@", f"{PASSWORD_WORD}@", 1)  # the password made wrong
    cases = [
        ({"WSFLEET_BACKEND": "postgres"}, "WSFLEET_POSTGRES_URL: required when"),
        (
            backend(f"mysql://u:{PASSWORD_WORD}@127.0.0.1/db"),
            "WSFLEET_POSTGRES_URL=(hidden): expected postgresql:// or postgres:// URI",
        ),
        (
            backend(f"postgresql://u:{PASSWORD_WORD}@127.0.0.1:99999999/db"),
            "the PostgreSQL URL has a port outside 0-65535",
        ),
        (
            backend(f"postgresql://u:{PASSWORD_WORD}@127.0.0.1:port/db"),
            "the PostgreSQL URL is not a valid libpq URI",
        ),
        (backend(wrong), "PostgreSQL refused the connection: password authentication failed"),
    ]
    for env, message in cases:
        code, stderr = await run_worker(env)
        assert code == 2, (message, stderr)
        assert message in stderr, stderr
        assert "WSFLEET_POSTGRES_URL" in stderr, stderr
        assert PASSWORD_WORD not in stderr
        assert password not in stderr
        assert "Traceback" not in stderr


async def test_a_database_that_does_not_answer_at_start_is_exit_1_not_a_traceback() -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        url = f"postgresql://u:{PASSWORD_WORD}@127.0.0.1:{port}/db"
        code, stderr = await run_worker(backend(url))

    assert code == 1, stderr
    assert "wsfleet worker: StoreUnavailable: PostgreSQL: " in stderr
    assert PASSWORD_WORD not in stderr
    assert "Traceback" not in stderr
