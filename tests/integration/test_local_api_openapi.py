"""The local event API (`wsfleet api` on aiohttp.web) against the Lambda router's OpenAPI
document, fuzzed by schemathesis over real HTTP on 127.0.0.1: the same answers as the Lambda
(never a 500; status codes, headers and bodies as documented), from the server users run."""

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from entrypoints.api import EventApi
from entrypoints.cli.api_server import LocalApiServer
from entrypoints.containers import provide, shutdown
from entrypoints.embedded import EmbeddedContainer
from entrypoints.settings import load_settings
from tests.integration.test_lambda_router_openapi import schema


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The API on its own event loop in a thread: schemathesis calls it synchronously."""
    data_dir: Path = tmp_path_factory.mktemp("api")
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    urls: list[str] = []

    async def serve() -> None:
        env = {"WSFLEET_DATA_DIR": str(data_dir), "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}
        container = EmbeddedContainer(settings=load_settings(env))
        api: EventApi = await provide(container.core.api)
        server = LocalApiServer(api, "127.0.0.1", 0)
        await server.start()
        urls.append(server.url)
        ready.set()
        try:
            await stop.wait()
        finally:
            await server.close()
            await shutdown(container)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the local API did not start"
    try:
        yield urls[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()


@schema.parametrize()
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_local_api_conforms_to_the_openapi_document(
    case: schemathesis.Case[Any], base_url: str
) -> None:
    # As for the Lambda: schema-valid data may still be refused (SSRF, URL parsing, state).
    # The document is the Lambda's: it has no 415, which only this server's perimeter
    # answers (a command not declared JSON: test_local_api.py), so every case declares it.
    case.call_and_validate(
        base_url=base_url,
        headers={"Content-Type": "application/json"},
        excluded_checks=[positive_data_acceptance],
    )
