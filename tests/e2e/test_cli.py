"""Every `wsfleet` command as a real subprocess: what it prints, what it changes, how it exits,
and how it refuses (bad arguments exit 2 with a usage line, refusals exit 1 with the reason,
a missing data directory is a sentence, never a stack trace)."""

import asyncio
import json
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from application.worker.session_keeper import worker_of
from application.worker_ids import name_of
from entrypoints.cli.main import main
from entrypoints.devstack.aws import LocalAws
from tests.e2e.cli_process import cli_process, run_cli
from tests.support.deployment import create_deployment_sync

COMMANDS = (
    "worker",
    "api",
    "start",
    "stop",
    "status",
    "history",
    "messages",
    "migrate",
    "end-session",
    "fleet",
    "simulate-upstream",
    "demo",
)
# Short timings; the health endpoint off (several processes on one host share no port).
FAST = {
    "WSFLEET_LEASE_MS": "2000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "0.5",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "600",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    # The store's checkpoint is what the API shows: recorded often here, hourly by default.
    "WSFLEET_CHECKPOINT_INTERVAL_S": "0.5",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_SHUTDOWN_BUDGET_S": "3",
    "WSFLEET_HEALTH_PORT": "0",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
}
LOCAL_URL = "ws://127.0.0.1:9/stream/feed"


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_help_names_every_command_and_the_exit_codes(tmp_path: Path) -> None:
    result = run_cli(["--help"], tmp_path)

    assert result.returncode == 0
    for command in COMMANDS:
        assert command in result.stdout
    assert "exit codes" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_its_own_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])

    assert exited.value.code == 0
    assert f"usage: wsfleet {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["start", "only-an-id"], "the following arguments are required: URL"),
        (["--backend", "sqlite", "status"], "invalid choice: 'sqlite'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_exit_2_with_a_usage_line(
    tmp_path: Path, args: list[str], complaint: str
) -> None:
    result = run_cli(args, tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith("usage: wsfleet")
    assert complaint in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--limit", "0"],
        ["worker", "--health-port", "70000"],
        ["worker", "--name", "no spaces"],
        ["api", "--port", "http"],
        ["simulate-upstream", "--rate", "0"],
        ["demo", "--workers", "1"],
        ["demo", "--endpoint-url", "http://127.0.0.1:5000"],
    ],
)
def test_bad_values_are_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args, environ={})

    assert exited.value.code == 2
    assert "usage: wsfleet" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["status"], ["history", "feed"], ["stop", "feed"]])
def test_a_missing_data_directory_is_a_clear_error_not_a_stack_trace(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "nowhere"

    result = run_cli([*args, "--data-dir", str(missing)], tmp_path)

    assert result.returncode == 2
    assert f"data directory {missing} does not exist" in result.stderr
    assert "Traceback" not in result.stderr
    assert not missing.exists()


def test_start_creates_the_data_directory_but_never_its_parents(tmp_path: Path) -> None:
    deep = tmp_path / "missing-parent" / "data"
    refused = run_cli(["start", "feed", LOCAL_URL, "--data-dir", str(deep)], tmp_path, FAST)
    assert refused.returncode == 2
    assert "its parent" in refused.stderr
    assert "does not exist" in refused.stderr
    assert not deep.parent.exists()

    created = run_cli(["start", "feed", LOCAL_URL], tmp_path, FAST)  # default ./.wsfleet

    assert created.returncode == 0, created.stderr
    assert "feed: accepted - STARTED" in created.stdout
    assert (tmp_path / ".wsfleet" / "wsfleet.sqlite").exists()


def test_refusals_exit_1_and_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["start", "feed", LOCAL_URL], tmp_path, FAST).returncode == 0
    private = run_cli(["start", "other", "ws://127.0.0.1:9/x"], tmp_path)  # default SSRF rules
    unknown_stop = run_cli(["stop", "ghost"], tmp_path)

    assert private.returncode == 1
    assert "host '127.0.0.1' resolves to an internal address" in private.stderr
    assert "WSFLEET_ALLOW_PRIVATE_UPSTREAMS=true" in private.stderr
    assert unknown_stop.returncode == 1
    assert "'ghost' was never started" in unknown_stop.stderr
    assert "Traceback" not in private.stderr + unknown_stop.stderr
    # The same mapping, in-process (a subprocess each would only repeat the start-up).
    env = {**FAST, "WSFLEET_DATA_DIR": str(tmp_path / ".wsfleet")}
    capsys.readouterr()
    for args, reason in [
        (["start", "feed", "ws://127.0.0.1:9/elsewhere"], "already started with a different"),
        (["start", "bad id", LOCAL_URL], "invalid connection id"),
        (["history", "ghost"], "'ghost' was never started"),
    ]:
        assert main(args, environ=env) == 1
        assert reason in capsys.readouterr().err


def test_a_malformed_url_is_refused_without_printing_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The URL parser's message quotes the netloc; the CLI says what is wrong as the API does."""
    env = {"WSFLEET_DATA_DIR": str(tmp_path / ".wsfleet")}
    url = "ws://us\u2100er:TopSecretPw@example.com/"

    assert main(["start", "x", url], environ=env) == 1

    err = capsys.readouterr().err
    assert "ws_url has a malformed host or port" in err
    assert "TopSecretPw" not in err
    assert "us\u2100er" not in err


def test_the_allow_private_hint_is_given_only_where_the_setting_would_help(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name that does not resolve is not an SSRF refusal: suggesting the allow-private
    setting there sent a newcomer the wrong way."""
    env = {"WSFLEET_DATA_DIR": str(tmp_path / ".wsfleet")}

    assert main(["start", "x", "ws://no-such-host.invalid/s"], environ=env) == 1
    unresolved = capsys.readouterr().err
    assert main(["start", "y", "ws://127.0.0.1:9/s"], environ=env) == 1
    internal = capsys.readouterr().err

    assert "does not resolve" in unresolved
    assert "WSFLEET_ALLOW_PRIVATE_UPSTREAMS" not in unresolved
    assert "WSFLEET_ALLOW_PRIVATE_UPSTREAMS=true" in internal


async def test_simulator_api_and_worker_run_and_the_operator_commands_see_them(
    tmp_path: Path,
) -> None:
    """GIVEN `wsfleet simulate-upstream`, `wsfleet api` and `wsfleet worker` on one data dir
    WHEN connections are STARTed through the API and through `wsfleet start`
    THEN the worker streams both, `status` and `history` show it, `stop` stops one, and every
    process exits 0 on SIGTERM."""
    simulator = await cli_process(
        "simulator", ["simulate-upstream", "--port", "0", "--rate", "20"], tmp_path, {}
    ).start()
    api = await cli_process("api", ["api", "--port", "0"], tmp_path, FAST).start()
    worker = await cli_process("worker", ["worker", "--name", "w1"], tmp_path, FAST).start()
    processes = (worker, api, simulator)
    try:
        sim_url = (await simulator.wait_for_line(r"listening on (ws://\S+)")).group(1)
        api_url = (await api.wait_for_line(r"listening on (http://\S+)")).group(1)
        await worker.wait_for_line(r"worker starting")
        via_api = {"event_type": "START", "connection_id": "a", "ws_url": f"{sim_url}/stream/a"}
        assert (await asyncio.to_thread(http, "POST", f"{api_url}/events", via_api))[0] == 202
        started = await asyncio.to_thread(
            run_cli, ["start", "b", f"{sim_url}/stream/b", "--json"], tmp_path, FAST
        )
        assert started.returncode == 0, started.stderr
        assert json.loads(started.stdout)["result"] == "accepted"

        for cid in ("a", "b"):
            await _until(lambda cid=cid: _checkpoint(api_url, cid) > 0, f"{cid} streams")
        status = await asyncio.to_thread(run_cli, ["status", "--json"], tmp_path)
        views = {v["connection_id"]: v for v in json.loads(status.stdout)["connections"]}
        assert {name_of(worker_of(v["owner"])) for v in views.values()} == {"w1"}
        assert all(v["lease_status"] == "HELD" for v in views.values())
        [session] = json.loads(status.stdout)["sessions"]
        assert session["status"] == "LIVE"
        assert session["session_id"] == views["a"]["owner"]
        sessions = await asyncio.to_thread(run_cli, ["history", session["session_id"]], tmp_path)
        assert "SessionOpened" in sessions.stdout, sessions.stdout + sessions.stderr
        table = await asyncio.to_thread(run_cli, ["status"], tmp_path)
        assert table.returncode == 0
        assert "w1-" in table.stdout
        history = await asyncio.to_thread(run_cli, ["history", "a", "--json"], tmp_path)
        types = [e["type"] for e in json.loads(history.stdout)["events"]]
        assert types[:2] == ["ConnectionStarted", "LeaseAcquired"]
        # On a loaded machine the worker may self-fence (a 2 s lease here) and take the
        # connection back: released and acquired again, each time, nothing else (seen once in a
        # clean clone's `make test`: "session no longer trusted", then token 2).
        again = types[2:]
        assert again == (["LeaseReleased", "LeaseAcquired"] * len(again))[: len(again)], types
        assert (
            "LeaseAcquired" in (await asyncio.to_thread(run_cli, ["history", "a"], tmp_path)).stdout
        )

        stopped = await asyncio.to_thread(run_cli, ["stop", "a"], tmp_path, FAST)
        assert stopped.returncode == 0
        assert "a: accepted - STOPPED" in stopped.stdout
        await _until(lambda: _view(api_url, "a")["owner"] is None, "the owner releases a")
        # The log says where the stream stood and why it was handed back, and explains the
        # versions it does not hold (the checkpoints).
        logged = json.loads(
            (await asyncio.to_thread(run_cli, ["history", "a", "--json"], tmp_path)).stdout
        )
        released = [e for e in logged["events"] if e["type"] == "LeaseReleased"][-1]
        assert released["reason"] == "stopped", released
        assert released["checkpoint_seq"] > 0, released
        text = (await asyncio.to_thread(run_cli, ["history", "a"], tmp_path)).stdout
        assert "reason=stopped" in text, text
        assert ": checkpoints (the connection keeps the latest" in text, text

        for process in processes:
            process.signal(signal.SIGTERM)
            assert await process.wait(15) == 0, process.output()
    finally:
        for process in processes:
            await process.kill()


def test_the_aws_backend_switch_works_against_a_local_endpoint(
    aws: LocalAws, tmp_path: Path
) -> None:
    deployment = create_deployment_sync(aws)
    flags = ["--backend", "aws", "--endpoint-url", aws.moto_url, "--region", aws.region]
    flags += ["--dynamodb-endpoint-url", aws.dynamodb_url]
    queue = ["--queue-url", deployment["WSFLEET_QUEUE_URL"]]

    started = run_cli(["start", "feed", LOCAL_URL, *flags, *queue], tmp_path, FAST)
    status = run_cli(["status", "--json", *flags], tmp_path)
    history = run_cli(["history", "feed", *flags], tmp_path)
    no_queue = run_cli(["stop", "feed", *flags], tmp_path)

    assert started.returncode == 0, started.stderr
    assert [v["connection_id"] for v in json.loads(status.stdout)["connections"]] == ["feed"]
    assert history.returncode == 0
    assert "ConnectionStarted" in history.stdout
    assert no_queue.returncode == 2
    assert "WSFLEET_QUEUE_URL" in no_queue.stderr
    assert not (tmp_path / ".wsfleet").exists()  # nothing embedded was touched


def _view(api_url: str, cid: str) -> dict[str, Any]:
    status, body = http("GET", f"{api_url}/connections/{cid}")
    assert status == 200, body
    view: dict[str, Any] = body
    return view


def _checkpoint(api_url: str, cid: str) -> int:
    return int(_view(api_url, cid)["checkpoint_seq"])


async def _until(condition: Any, what: str, timeout_s: float = 20.0) -> None:
    """Polls `condition` (blocking, so in a thread) until it holds."""
    try:
        async with asyncio.timeout(timeout_s):
            while not await asyncio.to_thread(condition):  # noqa: ASYNC110 (another process)
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None
