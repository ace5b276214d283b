"""DynamoDB helpers for tests: a client on the session's DynamoDB (DynamoDB Local), a reader of
the messages table, and a client wrapper that injects the faults no local engine simulates
(throttling, unprocessed batch items, transaction conflicts)."""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aioboto3
from botocore.config import Config
from botocore.exceptions import ClientError

from adapters.dynamodb import schema
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.backends import read_messages

__all__ = ["TABLES", "FaultyClient", "client_error", "dynamodb_client", "raising", "read_messages"]

# Fresh names per test are not needed (every table is dropped between tests), but distinct from
# the defaults so that nothing passes by relying on them.
TABLES = schema.TableNames(
    connections="test-connections",
    events="test-events",
    messages="test-messages",
    sessions="test-sessions",
)


_sessions: dict[str, aioboto3.Session] = {}


@asynccontextmanager
async def dynamodb_client(aws: LocalAws, **config: Any) -> AsyncIterator[Any]:
    """A new client, bound to the running loop (aiobotocore clients must not cross loops).
    The session behind it is shared: a session is not bound to a loop, and reusing it reuses
    its loaded service model (0.2 s per test otherwise). Static credentials: nothing to refresh."""
    settings = {"retries": {"mode": "standard", "max_attempts": 3}, "max_pool_connections": 50}
    session = _sessions.get(aws.region)
    if session is None:
        session = _sessions[aws.region] = aioboto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=aws.region,
        )
    async with session.client(
        "dynamodb", endpoint_url=aws.dynamodb_url, config=Config(**{**settings, **config})
    ) as client:
        yield client


def client_error(code: str, status: int = 400, **extra: Any) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": f"injected {code}"},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, "Injected")


class FaultyClient:
    """Wraps a real client; `plan(api, fault)` makes the next calls of `api` go through
    `fault(call, kwargs)` instead, which may raise or trim the request and answer. The faults
    no local engine produces are thereby tested through the adapters' real code paths."""

    Fault = Callable[[Callable[..., Any], dict[str, Any]], Any]

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._plans: dict[str, list[FaultyClient.Fault]] = {}
        self.calls: dict[str, int] = {}

    def plan(self, api: str, fault: "FaultyClient.Fault", times: int = 1) -> None:
        self._plans.setdefault(api, []).extend([fault] * times)

    def __getattr__(self, api: str) -> Any:
        real = getattr(self._inner, api)
        if not callable(real):
            return real

        async def call(**kwargs: Any) -> Any:
            self.calls[api] = self.calls.get(api, 0) + 1
            planned = self._plans.get(api)
            if planned:
                return await planned.pop(0)(real, kwargs)
            return await real(**kwargs)

        return call


def after(write: Callable[[], Awaitable[object]]) -> FaultyClient.Fault:
    """The request goes out only once `write` (another store's, on the real client) has landed
    (it must succeed): a race lost, made deterministic."""

    async def fault(call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        assert await write(), "the rival's write did not land"
        return await call(**kwargs)

    return fault


def raising(error: BaseException) -> FaultyClient.Fault:
    async def fault(call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        raise error

    return fault


async def half_batch_write(call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """BatchWriteItem that writes the first half of each table's requests and returns the rest
    as UnprocessedItems, as a throttled table does."""
    done: dict[str, Any] = {}
    left: dict[str, Any] = {}
    for table, requests in kwargs["RequestItems"].items():
        half = len(requests) // 2
        done[table], left[table] = requests[:half], requests[half:]
    if any(done.values()):
        await call(RequestItems={t: r for t, r in done.items() if r})
    return {"UnprocessedItems": {t: r for t, r in left.items() if r}}


async def half_batch_get(call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """BatchGetItem that reads the first half of the keys and returns the rest unprocessed."""
    (table, request), *_ = kwargs["RequestItems"].items()
    half = len(request["Keys"]) // 2
    response: dict[str, Any] = {"Responses": {table: []}}
    if half:  # a single key stays unprocessed as a whole
        response = await call(RequestItems={table: {**request, "Keys": request["Keys"][:half]}})
    response["UnprocessedKeys"] = {table: {**request, "Keys": request["Keys"][half:]}}
    return response
