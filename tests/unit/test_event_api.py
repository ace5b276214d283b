"""The event API on the in-memory adapters, wired by the same core container as on AWS:
the cases the Lambda tests do not reach cheaply (outages, leases held, odd bodies)."""

import json
from typing import Any

import pytest

from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.store import InMemoryConnectionStore
from entrypoints.api import EventApi, HttpRequest
from entrypoints.api.http import ApiError
from entrypoints.api.payloads import parse_event
from entrypoints.containers import CoreContainer, provide
from entrypoints.lambda_router.proxy import to_request
from entrypoints.settings import load_settings
from tests.support.apigw import proxy_event


class Api:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = FaultInjectingStore(InMemoryConnectionStore(), self.clock)
        self.queue = InMemoryNotificationQueue(self.clock)
        self.core = CoreContainer(
            settings=load_settings({"WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}),
            store=self.store,
            queue=self.queue,
            sink=None,
            metrics=None,
            upstream=None,
        )
        self.core.clock.override(self.clock)

    async def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
        api: EventApi = await provide(self.core.api)
        raw = (
            b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        )
        response = await api.handle(HttpRequest(method, path, raw, "req-1"))
        return response.status, response.body, response.headers


@pytest.fixture
def api() -> Api:
    return Api()


async def test_get_shows_the_owner_lease_remaining_and_token_of_a_held_lease(api: Api) -> None:
    await api("PUT", "/connections/c1", {"ws_url": "ws://127.0.0.1/x"})
    await api.store.open_session("worker-7#1", 20_000, 10, api.clock.now_ms())
    await api.store.try_acquire("c1", "worker-7#1", api.clock.now_ms())
    await api.clock.advance(5)

    status, view, _ = await api("GET", "/connections/c1")

    assert status == 200
    assert view["owner"] == "worker-7#1"
    assert view["lease_status"] == "HELD"
    assert view["token"] == 1
    assert 14_000 <= view["lease_remaining_ms"] <= 15_000, "the owner session's time left"


async def test_store_outage_is_503_with_retry_after_and_no_details(api: Api) -> None:
    api.store.outage = True
    for method, path, body in [
        ("GET", "/connections/c1", None),
        (
            "POST",
            "/events",
            {"event_type": "START", "connection_id": "c1", "ws_url": "ws://127.0.0.1/"},
        ),
    ]:
        status, body_, headers = await api(method, path, body)
        assert status == 503
        assert headers["Retry-After"] == "2"
        assert "injected" not in body_["message"]


async def test_a_repeated_start_is_not_hinted_again_and_a_repeated_stop_changes_nothing(
    api: Api,
) -> None:
    start = {"event_type": "START", "connection_id": "c1", "ws_url": "ws://127.0.0.1/x"}
    assert (await api("POST", "/events", start))[0] == 202
    assert (await api("POST", "/events", start))[0] == 200
    assert api.queue.sent == 2  # the first START's hint and its delayed copy (router.py)
    assert (await api("POST", "/connections/c1/stop"))[0] == 202
    assert (await api("POST", "/connections/c1/stop"))[0] == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"event_type": 1, "connection_id": "c1"}, "'event_type' must be a string, got number"),
        ({"event_type": "STOP", "connection_id": None}, "got null"),
        ({"event_type": "START", "connection_id": "c1", "ws_url": True}, "got boolean"),
        (b"\xff\xfe", "not UTF-8"),
        (b"1" * 5000, "not valid JSON"),  # an integer too long to convert
        ({}, "missing field(s): event_type, connection_id"),
    ],
)
async def test_shape_errors_are_precise(api: Api, body: Any, message: str) -> None:
    status, response, _ = await api("POST", "/events", body)
    assert status == 400
    assert message in response["message"]


@pytest.mark.parametrize("event_type", ["START", "start", "Start"])
def test_a_start_in_any_case_without_a_ws_url_is_refused_naming_the_field(
    event_type: str,
) -> None:
    """The event type is accepted in any case, and so is the rule that a START names its URL:
    one let through would reach the store without a URL (a 500, not the caller's 400)."""
    body = json.dumps({"event_type": event_type, "connection_id": "c1"}).encode()

    with pytest.raises(ApiError) as refused:
        parse_event(body)

    assert (refused.value.status, refused.value.code) == (400, "invalid_request")
    assert refused.value.message == "missing field(s): ws_url"


async def test_a_lower_case_start_without_a_ws_url_is_a_400_through_the_api(api: Api) -> None:
    status, response, _ = await api(
        "POST", "/events", {"event_type": "start", "connection_id": "c1"}
    )

    assert status == 400
    assert response["message"] == "missing field(s): ws_url"
    assert await api.store.get("c1") is None


async def test_head_and_options_are_405_with_allow(api: Api) -> None:
    for method in ("HEAD", "OPTIONS", "PATCH"):
        status, _, headers = await api(method, "/connections/c1/history")
        assert status == 405
        assert headers["Allow"] == "GET"


def test_a_proxy_body_with_a_lone_surrogate_becomes_bytes_that_are_refused_later() -> None:
    request = to_request(proxy_event("POST", "/events", raw_body='{"a": "\ud800"}'), "r")
    with pytest.raises(UnicodeDecodeError):
        request.body.decode("utf-8")


def test_behind_a_base_path_mapping_the_route_comes_from_the_proxy_resource() -> None:
    event = proxy_event("GET", "/connections/c1")
    event["path"] = "/v1/connections/c1"  # a custom domain mapped at /v1
    assert to_request(event, "r").path == "/connections/c1"
    event["pathParameters"] = None  # an explicit resource, no proxy
    event["resource"] = "/connections/{id}"
    assert to_request(event, "r").path == "/v1/connections/c1"
