"""The PostgreSQL of the whole test session, from the dev stack (entrypoints/devstack/
postgres.py): one throwaway server per test session (per xdist worker), a fresh database per
test. Without the binaries the PostgreSQL tests are skipped, saying why; under CI=true that
is a failure instead, so a CI run can never pass without them."""

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import NoReturn

import pytest

from entrypoints.devstack.postgres import LocalPostgres, fresh_database, local_postgres, locate

STARTED: list[LocalPostgres] = []


def missing_server(reason: str) -> NoReturn:
    """Skips the test, or fails it under CI=true."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and PostgreSQL cannot run here: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL cannot run here: {reason}")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    found = locate()
    if isinstance(found, str):
        missing_server(found)
    with local_postgres(tmp_path_factory.mktemp("local-postgres"), found) as server:
        STARTED.append(server)
        yield server


@pytest.fixture
async def postgres_url(postgres_server: LocalPostgres) -> AsyncIterator[str]:
    """The URI of an empty database of this test's own (left to the server's removal)."""
    async with fresh_database(postgres_server, "test", drop=False) as url:
        yield url


async def migrated_database(request: pytest.FixtureRequest, stack: AsyncExitStack) -> str:
    """For fixture factories (which cannot ask for an async fixture by name): a fresh database
    of the session's server, migrated as `wsfleet migrate` does (the adapters only check the
    schema's version)."""
    from adapters.postgres.db import migrate_database

    server: LocalPostgres = request.getfixturevalue("postgres_server")
    url = await stack.enter_async_context(fresh_database(server, "test", drop=False))
    await migrate_database(url)
    return url
