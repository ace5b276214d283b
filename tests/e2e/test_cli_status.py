"""`wsfleet status` as a real process on a real store (SQLite, PostgreSQL): what each worker
session row says must be true after releases and expiries."""

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresConnectionStore
from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from application.ports import ConnectionStore
from tests.e2e.cli_process import run_cli
from tests.support.postgres import migrated_database

Opener = Callable[[], AbstractAsyncContextManager[ConnectionStore]]


@pytest.fixture(params=["embedded", "postgres"])
async def local_state(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, str], Opener]]:
    """(the variables that point the CLI at a backend's state, a store opener on it)."""
    if request.param == "embedded":
        data = tmp_path / ".wsfleet"  # the CLI's default, in the directory it runs in
        data.mkdir()
        yield {}, lambda: SqliteConnectionStore.open(data / "wsfleet.sqlite")
        return
    async with AsyncExitStack() as stack:
        url = await migrated_database(request, stack)
        env = {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": url}
        yield env, lambda: PostgresConnectionStore.open(url, pool_size=1)


async def test_status_rows_say_what_each_session_owns_now_and_when_it_expired(
    tmp_path: Path, local_state: tuple[dict[str, str], Opener]
) -> None:
    """GIVEN a session that held 5 connections at its last renew, released them all and ended,
    and a session that expired a minute ago, THEN `status` shows the first owning 0 and no
    expiry, the second as expired "ago", never a negative time."""
    env, open_store = local_state
    now = SystemClock().now_ms()
    async with open_store() as store:
        await store.open_session("done-1#1", 600_000, 10, now - 5_000)
        assert await store.renew_session("done-1#1", 600_000, 5, 10, now - 4_000)
        for i in range(5):
            await store.start(f"c{i}", f"wss://feed.example.com/{i}", now - 3_500)
            acquired = await store.try_acquire(f"c{i}", "done-1#1", now - 3_000)
            assert acquired is not None
            await store.release(f"c{i}", "done-1#1", acquired.token, 0, now - 2_000)
        await store.end_session("done-1#1", "shutdown", now - 1_000)
        await store.open_session("gone-2#1", 1_000, 10, now - 61_000)

    shown = run_cli(["status"], tmp_path, env)

    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line for line in shown.stdout.splitlines() if "#1" in line}
    done, gone = rows["done-1#1"].split("│"), rows["gone-2#1"].split("│")
    assert [cell.strip() for cell in done[1:4]] == ["ended (shutdown)", "-", "0"], shown.stdout
    assert gone[1].strip() == "expired"
    assert gone[2].strip().endswith("s ago"), shown.stdout
    assert "-" not in gone[2], shown.stdout
    assert "checkpoint: the last seq recorded in the store" in shown.stdout
