"""`wsfleet end-session` on every backend (in-process: `main`, the CLI's own entry point, over
a real SQLite file, a real PostgreSQL database and the local AWS): a known death ends the
worker's sessions and hints its connections; a repeat changes nothing; no selector is a usage
error."""

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.schema import TableNames
from adapters.postgres.db import migrate_database
from adapters.postgres.store import PostgresConnectionStore
from adapters.sqlite.store import SqliteConnectionStore
from application.ports import ConnectionStore
from entrypoints.cli.main import main
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.postgres import LocalPostgres, fresh_database
from tests.support.deployment import create_deployment_sync
from tests.support.dynamodb import dynamodb_client

WORKER = "host-0badcafe"
URL = "ws://127.0.0.1:9/stream/feed"
LEASE = 30_000


async def _hold(store: ConnectionStore) -> None:
    now = int(time.time() * 1000)
    await store.open_session(f"{WORKER}#1", LEASE, 10, now)
    await store.open_session("other-1234abcd#1", LEASE, 10, now)
    for cid, sid in (("a", f"{WORKER}#1"), ("b", f"{WORKER}#1"), ("c", "other-1234abcd#1")):
        await store.start(cid, URL, now)
        assert await store.try_acquire(cid, sid, now) is not None


async def _ended(store: ConnectionStore) -> list[str]:
    now = int(time.time() * 1000)
    return sorted(s.session_id for s in await store.list_sessions() if not s.is_live(now))


def _run(args: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    assert main(["end-session", *args, "--json"], environ=env) == 0, capsys.readouterr().err
    document: Any = json.loads(capsys.readouterr().out)
    return document


@pytest.fixture(params=["embedded", "postgres"])
def local_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[dict[str, str], Callable[[], AbstractAsyncContextManager[ConnectionStore]]]:
    """(the variables that point the CLI at a backend's state, a store opener on it)."""
    if request.param == "embedded":
        data = tmp_path / "data"
        data.mkdir()
        return {"WSFLEET_DATA_DIR": str(data)}, lambda: SqliteConnectionStore.open(
            data / "wsfleet.sqlite"
        )
    server: LocalPostgres = request.getfixturevalue("postgres_server")

    async def fresh() -> str:
        async with fresh_database(server, "test", drop=False) as url:
            await migrate_database(url)
            return url

    url = asyncio.run(fresh())
    env = {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": url}
    return env, lambda: PostgresConnectionStore.open(url, pool_size=1)


def test_end_session_ends_the_worker_and_is_idempotent(
    local_backend: tuple[dict[str, str], Callable[[], Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    env, open_store = local_backend

    async def setup() -> None:
        async with open_store() as store:
            await _hold(store)

    asyncio.run(setup())

    first = _run(["--worker", WORKER, "--reason", "reaped"], env, capsys)
    again = _run(["--worker", WORKER], env, capsys)

    assert first == {
        "sessions": [f"{WORKER}#1"],
        "ended": [f"{WORKER}#1"],
        "hinted": ["a", "b"],
        "hints_sent": True,
    }
    assert again["ended"] == []

    async def check() -> None:
        async with open_store() as store:
            assert await _ended(store) == [f"{WORKER}#1"]
            session = await store.get_session(f"{WORKER}#1")
            assert session is not None
            assert session.ended_reason == "reaped"

    asyncio.run(check())


def test_end_session_without_a_selector_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").mkdir()
    assert main(["end-session"], environ={"WSFLEET_DATA_DIR": str(tmp_path / "data")}) == 2
    assert "--worker, --task or --session" in capsys.readouterr().err


def test_aws_end_session_by_session_id(
    aws: LocalAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = create_deployment_sync(aws)

    async def with_store(body: object) -> list[str]:
        async with dynamodb_client(aws) as client:
            store = DynamoDbConnectionStore(client, tables=TableNames())
            if body == "setup":
                await _hold(store)
            return await _ended(store)

    asyncio.run(with_store("setup"))
    flags = ["--backend", "aws", "--endpoint-url", aws.moto_url, "--region", aws.region]
    flags += ["--dynamodb-endpoint-url", aws.dynamodb_url]
    flags += ["--queue-url", deployment["WSFLEET_QUEUE_URL"]]

    outcome = _run([*flags, "--session", f"{WORKER}#1"], {}, capsys)

    assert outcome["ended"] == [f"{WORKER}#1"]
    assert outcome["hinted"] == ["a", "b"]
    assert outcome["hints_sent"]
    assert asyncio.run(with_store("check")) == [f"{WORKER}#1"]
