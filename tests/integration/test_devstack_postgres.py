"""The dev stack's throwaway PostgreSQL: started from the binaries the project installs, on
127.0.0.1 with a password, stopped and removed with its directory; a missing install is named,
and under CI=true it fails the tests that need it instead of skipping them."""

import asyncio
from pathlib import Path

import asyncpg
import pytest

from adapters.postgres.schema import SCHEMA_VERSION
from entrypoints.devstack.postgres import (
    LocalPostgres,
    fresh_database,
    local_postgres,
    locate,
    open_local_postgres,
)
from entrypoints.devstack.service import ServiceError
from tests.support import postgres as support


async def test_a_fresh_database_is_empty_and_dropped_afterwards(
    postgres_server: LocalPostgres,
) -> None:
    async with fresh_database(postgres_server) as url:
        name = url.rsplit("/", 1)[1]
        conn = await asyncpg.connect(url)
        try:
            tables = await conn.fetchval(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            )
            assert tables == 0
        finally:
            await conn.close()
    admin = await asyncpg.connect(postgres_server.url())
    try:
        assert await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name) is None
    finally:
        await admin.close()


async def test_only_the_password_logs_in(postgres_server: LocalPostgres) -> None:
    wrong = postgres_server.url().replace(postgres_server.password, "not-the-password")
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(wrong)
    assert postgres_server.password not in repr(postgres_server)
    assert postgres_server.password not in postgres_server.describe()


def test_a_stopped_server_is_gone_with_its_directory(tmp_path: Path) -> None:
    if isinstance(found := locate(), str):
        support.missing_server(found)
    with local_postgres(tmp_path, found) as server:
        assert (server.data_dir / "PG_VERSION").read_text().strip() == server.version.split(".")[0]
    assert not server.data_dir.parent.exists()
    assert "ready to accept connections" in (tmp_path / "postgres.log").read_text()


def test_a_missing_install_is_named_and_refused(tmp_path: Path) -> None:
    reason = locate(tmp_path)
    assert reason == f"initdb and postgres not found in {tmp_path}"
    with pytest.raises(ServiceError, match="not found"), local_postgres(tmp_path, tmp_path):
        pass


def test_under_ci_a_missing_server_fails_and_elsewhere_skips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        support.missing_server("no binaries")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no binaries"):
        support.missing_server("no binaries")


async def test_a_restart_ends_every_session_and_keeps_the_data_address_and_port(
    tmp_path: Path,
) -> None:
    if isinstance(found := locate(), str):
        support.missing_server(found)
    async with open_local_postgres(tmp_path) as server:
        before = await asyncpg.connect(server.url())
        try:
            await before.execute("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
            await asyncio.to_thread(server.restart)
            with pytest.raises((asyncpg.PostgresConnectionError, asyncpg.InterfaceError, OSError)):
                await before.fetchval("SELECT 1")
        finally:
            await before.close(timeout=1)
        after = await asyncpg.connect(server.url())
        try:
            assert await after.fetchval("SELECT n FROM kept") == 7
        finally:
            await after.close()
    assert "ready to accept connections" in (tmp_path / "postgres-2.log").read_text()


async def test_open_postgres_is_a_migrated_deployment_its_image_workers_can_run_on(
    postgres_server: LocalPostgres,
) -> None:
    """The dev stack's postgres deployment: a fresh database, migrated, seen through the
    production container; its variables point a process there, and it never shows the
    password."""
    from entrypoints.devstack.backends import open_postgres
    from entrypoints.devstack.workers import AWS_WORKER

    harness = {"WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}
    async with open_postgres(postgres_server, harness) as deployment:
        outcome = await deployment.router.start("feed", "ws://127.0.0.1:9/stream/feed")
        stored = await deployment.store.get("feed")
        messages = await deployment.messages("feed")
        url = deployment.env["WSFLEET_POSTGRES_URL"]
        conn = await asyncpg.connect(url)
        try:
            version = await conn.fetchval("SELECT version FROM schema_version")
        finally:
            await conn.close()
        shown = f"{deployment!r} {deployment.where} {deployment.engine}"

    assert outcome.changed
    assert stored is not None
    assert messages == []
    assert version == SCHEMA_VERSION
    assert deployment.env["WSFLEET_BACKEND"] == "postgres"
    assert deployment.worker_argv("w1") == list(AWS_WORKER)
    assert postgres_server.password not in shown
    name = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(postgres_server.url())
    try:
        assert await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name) is None
    finally:
        await admin.close()


@pytest.mark.parametrize("name", ["embedded", "postgres"])
async def test_the_registry_starts_a_backend_for_a_run_on_this_machine(
    name: str, tmp_path: Path
) -> None:
    """What the demo and the benchmarks open for a backend without flags of its own: its
    services under the run directory, a deployment on them, all gone afterwards."""
    from entrypoints.devstack.backends import start_backend

    if name == "postgres" and isinstance(found := locate(), str):
        support.missing_server(found)
    async with start_backend(name, tmp_path, {"WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}) as d:
        await d.router.start("feed", "ws://127.0.0.1:9/stream/feed")
        started = await d.store.get("feed")
        server = d.postgres

    assert d.name == d.env["WSFLEET_BACKEND"] == name
    assert started is not None
    assert (server is not None) == (name == "postgres")
    if server is not None:  # the throwaway server was stopped and removed
        assert not server.data_dir.exists()
