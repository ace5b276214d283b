"""The worker's session renewals go through a DynamoDB client of their own that does not retry:
a throttled renewal returns at once and the session keeper retries it within its trust, instead
of botocore waiting out its back-off (up to 1 s, then 2 s) inside the call (docs/decisions.md,
"The heartbeat's retries are the keeper's").

Against a stand-in DynamoDB endpoint on 127.0.0.1 that throttles every request and counts them
by API: the composition root's store (AwsContainer) as a worker gets it."""

import json
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from application.errors import StoreUnavailable
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.devstack.service import CREDENTIALS
from entrypoints.settings import load_settings

THROTTLED = {
    "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
    "message": "Rate of requests exceeds the allowed throughput.",
}


@pytest.fixture
async def throttling_endpoint() -> AsyncIterator[tuple[str, Counter[str]]]:
    """(url, requests by API) of an endpoint that answers every request throttled."""
    asked: Counter[str] = Counter()

    async def answer(request: web.Request) -> web.Response:
        asked[request.headers.get("X-Amz-Target", "?").rpartition(".")[2]] += 1
        return web.Response(
            status=400, text=json.dumps(THROTTLED), content_type="application/x-amz-json-1.0"
        )

    app = web.Application()
    app.router.add_post("/", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", asked
    finally:
        await runner.cleanup()


async def test_a_throttled_renewal_is_tried_once_and_other_calls_as_configured(
    throttling_endpoint: tuple[str, Counter[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asked = throttling_endpoint
    for name, value in CREDENTIALS.items():  # botocore reads them from the environment
        monkeypatch.setenv(name, value)
    settings = load_settings(
        {
            "WSFLEET_BACKEND": "aws",
            "WSFLEET_QUEUE_URL": "http://127.0.0.1:9/queue",
            "WSFLEET_REGION": "eu-west-1",
            "WSFLEET_DYNAMODB_ENDPOINT_URL": url,
            "WSFLEET_AWS_MAX_ATTEMPTS": "2",  # one retry: botocore's first back-off, <= 1 s
        }
    )
    container = AwsContainer(settings=settings)
    try:
        store = await provide(container.store)
        with pytest.raises(StoreUnavailable):
            await store.renew_session("w1#1", 4_000, 0, 10, 1_700_000_000_000)
        assert asked["UpdateItem"] == 1, asked
        with pytest.raises(StoreUnavailable):
            await store.get("c1")
        assert asked["GetItem"] == 2, asked
    finally:
        await shutdown(container)
