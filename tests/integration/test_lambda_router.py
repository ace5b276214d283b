"""The Lambda event router, driven with real API Gateway REST proxy events against moto
(DynamoDB tables and the SQS queue created by the adapters' helpers). Synchronous tests: the
handler runs its own event loop, as it does in a Lambda container."""

import json
import os
from collections.abc import Iterator
from typing import Any

import attrs
import boto3
import pytest

from adapters.dynamodb.schema import (
    DEFAULT_CONNECTIONS_TABLE,
    DEFAULT_EVENTS_TABLE,
    DEFAULT_MESSAGES_TABLE,
)
from entrypoints.devstack.aws import LocalAws
from entrypoints.lambda_router import handler as lambda_handler
from tests.support.apigw import LambdaContext, proxy_event
from tests.support.aws import reset
from tests.support.deployment import create_deployment_sync
from tests.support.logs import preserved_logging

URL = "ws://127.0.0.1:9/stream/m1?token=s3cr3t-value"


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: dict[str, Any]


@attrs.define
class RouterUnderTest:
    aws: LocalAws
    env: dict[str, str]
    monkeypatch: pytest.MonkeyPatch

    reconfigured: bool = False

    def configure(self, **settings: str) -> None:
        """Set WSFLEET_<NAME> variables; the next invocation starts a new Lambda container."""
        self.reconfigured = True
        lambda_handler.close()
        for name, value in settings.items():
            self.monkeypatch.setenv(f"WSFLEET_{name}", value)

    def __call__(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        event = proxy_event(method, path, body, **kwargs)
        response = lambda_handler.handler(event, LambdaContext())
        assert set(response) == {"statusCode", "headers", "body", "isBase64Encoded"}
        assert isinstance(response["body"], str)
        assert response["headers"]["X-Request-Id"] == event["requestContext"]["requestId"]
        return Reply(response["statusCode"], response["headers"], json.loads(response["body"]))

    def _client(self, service: str) -> Any:
        url = self.aws.dynamodb_url if service == "dynamodb" else self.aws.moto_url
        return boto3.client(service, endpoint_url=url, region_name=self.aws.region)

    def items(self, table: str = DEFAULT_CONNECTIONS_TABLE) -> list[dict[str, Any]]:
        return list(self._client("dynamodb").scan(TableName=table)["Items"])

    def hints(self) -> list[str]:
        """The first-round hints in the queue now visible; every visible message is received
        and deleted, delayed copies (application/hints.py) too, but those are not listed: a
        test's copy may become visible during the next test."""
        sqs, url = self._client("sqs"), self.env["WSFLEET_QUEUE_URL"]
        found: list[str] = []
        while True:
            messages = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages")
            if not messages:
                return found
            for message in messages:
                body = json.loads(message["Body"])
                if not body.get("delayed"):
                    found.append(body["connection_id"])
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def empty_deployment(self) -> None:
        self.hints()
        dynamodb = self._client("dynamodb")
        for table in (DEFAULT_CONNECTIONS_TABLE, DEFAULT_EVENTS_TABLE, DEFAULT_MESSAGES_TABLE):
            for item in dynamodb.scan(TableName=table)["Items"]:
                keys = {k: v for k, v in item.items() if k in ("pk", "sk")}
                dynamodb.delete_item(TableName=table, Key=keys)

    def nothing_written(self) -> bool:
        # A copy never goes out without its first round: no hint means none.
        return not self.items() and not self.items(DEFAULT_EVENTS_TABLE) and not self.hints()


@pytest.fixture(scope="module")
def deployment(aws_session: LocalAws) -> Iterator[dict[str, str]]:
    """Tables and queue once per module (creating tables takes about a second); each test
    starts from empty tables and an empty queue. The Lambda container (its loop and clients)
    is kept across tests, as Lambda keeps it across invocations, unless a test reconfigures."""
    reset(aws_session)
    with preserved_logging():
        yield create_deployment_sync(aws_session)
        lambda_handler.close()


@pytest.fixture
def api(
    aws_session: LocalAws, deployment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[RouterUnderTest]:
    for name in [n for n in os.environ if n.startswith("WSFLEET_")]:
        monkeypatch.delenv(name)
    for name, value in deployment.items():
        monkeypatch.setenv(name, value)
    # The upstream URLs in these tests are on loopback; SSRF tests switch this off.
    monkeypatch.setenv("WSFLEET_ALLOW_PRIVATE_UPSTREAMS", "true")
    under_test = RouterUnderTest(aws_session, deployment, monkeypatch)
    under_test.empty_deployment()
    try:
        yield under_test
    finally:
        if under_test.reconfigured:
            lambda_handler.close()  # the next test gets a container with the default settings


def start_event(cid: str = "m1", url: str = URL, event_type: str = "START") -> dict[str, str]:
    return {"event_type": event_type, "connection_id": cid, "ws_url": url}


# --- accepted commands and idempotency ------------------------------------------------------


def test_new_start_is_accepted_stored_and_hinted_once(api: RouterUnderTest) -> None:
    first = api("POST", "/events", start_event())
    again = api("POST", "/events", start_event())

    assert first.status == 202
    assert first.body["result"] == "accepted"
    assert first.body["connection"]["desired_state"] == "STARTED"
    assert again.status == 200
    assert again.body["result"] == "unchanged"
    assert again.body["connection"] == first.body["connection"]
    assert api.hints() == ["m1"]  # the repeated START sent no second hint
    assert len(api.items(DEFAULT_EVENTS_TABLE)) == 1  # ConnectionStarted, once


def test_article_style_lowercase_event_type_is_accepted(api: RouterUnderTest) -> None:
    assert api("POST", "/events", start_event(event_type="start")).status == 202


def test_resource_style_start_and_stop(api: RouterUnderTest) -> None:
    assert api("PUT", "/connections/m2", {"ws_url": URL}).status == 202
    assert api("PUT", "/connections/m2", {"ws_url": URL}).status == 200
    stopped = api("POST", "/connections/m2/stop")
    assert stopped.status == 202
    assert stopped.body["connection"]["desired_state"] == "STOPPED"
    assert api("POST", "/connections/m2/stop").status == 200


def test_stop_then_start_again_restarts(api: RouterUnderTest) -> None:
    api("POST", "/events", start_event())
    assert api("POST", "/events", {"event_type": "STOP", "connection_id": "m1"}).status == 202
    assert api("POST", "/events", {"event_type": "STOP", "connection_id": "m1"}).status == 200
    restarted = api("POST", "/events", start_event())
    assert restarted.status == 202
    assert restarted.body["connection"]["desired_state"] == "STARTED"


def test_get_shows_state_owner_lease_token_checkpoint_with_url_redacted(
    api: RouterUnderTest,
) -> None:
    api("POST", "/events", start_event())
    reply = api("GET", "/connections/m1")

    assert reply.status == 200
    view = reply.body
    assert view["connection_id"] == "m1"
    assert view["desired_state"] == "STARTED"
    assert view["owner"] is None
    assert view["lease_remaining_ms"] == 0
    assert view["token"] == 0
    assert view["checkpoint_seq"] == 0
    assert "s3cr3t" not in json.dumps(view)
    assert view["ws_url"] == "ws://127.0.0.1:9/stream/m1?token=***"


def test_history_lists_the_ownership_events_in_order(api: RouterUnderTest) -> None:
    api("POST", "/events", start_event())
    api("POST", "/connections/m1/stop")
    reply = api("GET", "/connections/m1/history")

    assert reply.status == 200
    assert [e["type"] for e in reply.body["events"]] == ["ConnectionStarted", "StopRequested"]
    assert [e["version"] for e in reply.body["events"]] == [1, 2]
    assert "s3cr3t" not in json.dumps(reply.body)


# --- refusals ---------------------------------------------------------------------------------


def test_unknown_connection_is_404_for_stop_get_and_history(api: RouterUnderTest) -> None:
    replies = [
        api("POST", "/events", {"event_type": "STOP", "connection_id": "ghost"}),
        api("POST", "/connections/ghost/stop"),
        api("GET", "/connections/ghost"),
        api("GET", "/connections/ghost/history"),
    ]
    assert [r.status for r in replies] == [404, 404, 404, 404]
    assert all(r.body["error"] == "not_found" for r in replies)
    assert api.nothing_written()


def test_start_with_a_different_url_is_409_and_changes_nothing(api: RouterUnderTest) -> None:
    api("POST", "/events", start_event())
    before = api.items()

    reply = api("POST", "/events", start_event(url="ws://127.0.0.1:9/other"))

    assert reply.status == 409
    assert reply.body["error"] == "conflict"
    assert "stop it first" in reply.body["message"]
    assert api.items() == before


BAD_REQUESTS: list[tuple[str, dict[str, Any], str, str]] = [
    ("malformed JSON", {"raw_body": '{"event_type": "START",'}, "malformed_json", "not valid JSON"),
    ("empty body", {"raw_body": ""}, "malformed_json", "body is empty"),
    ("not an object", {"body": ["START"]}, "invalid_request", "must be a JSON object, got array"),
    (
        "missing field",
        {"body": {"event_type": "START", "connection_id": "m1"}},
        "invalid_request",
        "missing field(s): ws_url",
    ),
    (
        "unknown field",
        {"body": {**start_event(), "priority": 1}},
        "invalid_request",
        "unknown field(s) 'priority'",
    ),
    (
        "wrong type",
        {"body": {**start_event(), "connection_id": 42}},
        "invalid_request",
        "'connection_id' must be a string, got number",
    ),
    (
        "invalid connection id",
        {"body": start_event(cid="bad id!")},
        "invalid_request",
        "invalid connection id 'bad id!'",
    ),
    (
        "unknown event_type",
        {"body": start_event(event_type="RESTART")},
        "unknown_event_type",
        "event_type must be START or STOP, got 'RESTART'",
    ),
    (
        "not a ws url",
        {"body": start_event(url="https://feeds.example.com/x")},
        "invalid_request",
        "must start with ws:// or wss://",
    ),
    (
        "malformed url",
        {"body": start_event(url="ws://[::1/x")},
        "invalid_request",
        "not a valid URL",
    ),
    (
        "deeply nested JSON",
        {"raw_body": "[" * 5000 + "]" * 5000},
        "malformed_json",
        "",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "code", "message"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_input_is_a_precise_400_and_writes_nothing(
    api: RouterUnderTest, kwargs: dict[str, Any], code: str, message: str
) -> None:
    reply = api("POST", "/events", **kwargs)

    assert reply.status == 400, reply.body
    assert reply.body["error"] == code
    assert message in reply.body["message"]
    assert "Traceback" not in reply.body["message"]
    assert api.nothing_written()


def test_invalid_id_in_the_path_is_400(api: RouterUnderTest) -> None:
    for method, path, body in [
        ("PUT", "/connections/bad%20id", {"ws_url": URL}),
        ("GET", "/connections/caf%C3%A9", None),
        ("POST", "/connections/-leading-dash/stop", None),
    ]:
        reply = api(method, path, body)
        assert reply.status == 400, (path, reply.body)
        assert "invalid connection id" in reply.body["message"]
    assert api.nothing_written()


def test_base64_bodies_are_decoded_and_bad_base64_refused(api: RouterUnderTest) -> None:
    assert api("POST", "/events", start_event(), base64_body=True).status == 202
    event = proxy_event("POST", "/events", raw_body="%%%")
    event["isBase64Encoded"] = True
    response = lambda_handler.handler(event, LambdaContext())
    assert response["statusCode"] == 400
    assert "base64" in json.loads(response["body"])["message"]


def test_oversized_body_is_413_and_writes_nothing(api: RouterUnderTest) -> None:
    huge = start_event(url="ws://127.0.0.1:9/" + "x" * 20_000)
    assert api("POST", "/events", huge).status == 413
    assert api("POST", "/events", huge, base64_body=True).status == 413
    reply = api("PUT", "/connections/m1", huge)
    assert reply.status == 413
    assert "16384" in reply.body["message"]
    assert api.nothing_written()


def test_wrong_method_is_405_with_allow_header(api: RouterUnderTest) -> None:
    cases = {
        ("GET", "/events"): "POST",
        ("DELETE", "/connections/m1"): "GET, PUT",
        ("GET", "/connections/m1/stop"): "POST",
        ("POST", "/connections/m1/history"): "GET",
    }
    for (method, path), allow in cases.items():
        reply = api(method, path)
        assert reply.status == 405, path
        assert reply.headers["Allow"] == allow
        assert reply.body["error"] == "method_not_allowed"
    assert api.nothing_written()


def test_unknown_route_is_404(api: RouterUnderTest) -> None:
    assert api("GET", "/nope").status == 404
    assert api("POST", "/connections").status == 404


def test_an_event_that_is_not_a_proxy_event_is_400(api: RouterUnderTest) -> None:
    response = lambda_handler.handler({"detail-type": "Scheduled Event"}, LambdaContext())
    assert response["statusCode"] == 400
    assert "not an API Gateway REST proxy event" in json.loads(response["body"])["message"]


# --- SSRF -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ws://127.0.0.1:8765/stream/x",
        "ws://localhost/stream/x",
        "ws://169.254.169.254/latest/meta-data",
        "wss://10.0.0.5/x",
        "ws://[::1]:80/x",
        "ws://224.0.0.1/x",
    ],
)
def test_internal_upstreams_are_refused_by_default(api: RouterUnderTest, url: str) -> None:
    api.configure(ALLOW_PRIVATE_UPSTREAMS="false")

    reply = api("POST", "/events", start_event(url=url))

    assert reply.status == 400
    assert reply.body["error"] == "forbidden_url"
    assert api.nothing_written()


def test_a_refusal_body_shows_neither_resolved_addresses_nor_resolver_text(
    api: RouterUnderTest,
) -> None:
    """A caller learns that the URL is refused, not where names point inside the network."""
    api.configure(ALLOW_PRIVATE_UPSTREAMS="false")

    internal = api("POST", "/events", start_event(url="ws://localhost/stream/x"))
    unknown = api("POST", "/events", start_event(url="ws://no-such-host.invalid/x"))

    assert internal.body["message"] == "host 'localhost' resolves to an internal address; " + (
        "set the allow-private setting only for local development"
    )
    assert unknown.body["message"] == "host 'no-such-host.invalid' does not resolve"


@pytest.mark.parametrize(
    "url", ["ws://169.254.169.254/latest/meta-data", "ws://2852039166/", "ws://[fd00:ec2::254]/"]
)
def test_metadata_upstreams_are_refused_even_with_private_ones_allowed(
    api: RouterUnderTest, url: str
) -> None:
    api.configure(ALLOW_PRIVATE_UPSTREAMS="true")

    reply = api("POST", "/events", start_event(url=url))

    assert (reply.status, reply.body["error"]) == (400, "forbidden_url")
    assert api.nothing_written()


def test_loopback_is_allowed_with_the_setting(api: RouterUnderTest) -> None:
    api.configure(ALLOW_PRIVATE_UPSTREAMS="true")
    assert api("POST", "/events", start_event(url="ws://127.0.0.1:8765/stream/x")).status == 202


def test_allow_list_refuses_other_hosts(api: RouterUnderTest) -> None:
    # An allowed name must still resolve (to vet its addresses): localhost does, offline.
    api.configure(ALLOWED_UPSTREAM_HOSTS="feeds.internal,localhost")

    refused = api("POST", "/events", start_event(url="ws://127.0.0.1/x"))
    allowed = api("POST", "/events", start_event(cid="m2", url="ws://localhost/x"))

    assert refused.status == 400
    assert "not in the allowed upstream hosts" in refused.body["message"]
    assert allowed.status == 202


# --- store outage, logs -----------------------------------------------------------------------


def test_unreachable_store_is_503_with_retry_after(
    api: RouterUnderTest, unused_tcp_port: int
) -> None:
    api.configure(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{unused_tcp_port}",
        DYNAMODB_ENDPOINT_URL=f"http://127.0.0.1:{unused_tcp_port}",
        AWS_MAX_ATTEMPTS="1",
        AWS_CONNECT_TIMEOUT_S="0.5",
    )

    reply = api("GET", "/connections/m1")

    assert reply.status == 503
    assert reply.headers["Retry-After"] == "2"
    assert reply.body["error"] == "service_unavailable"


def test_every_log_line_of_a_request_names_the_request_and_connection(
    api: RouterUnderTest, capsys: pytest.CaptureFixture[str]
) -> None:
    api.configure(LOG_LEVEL="DEBUG")
    api("POST", "/events", start_event())
    api("POST", "/events", start_event(url="ws://127.0.0.1:9/other"))  # 409

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    request_lines = [line for line in lines if line["logger"].startswith("entrypoints.api")]
    assert len(request_lines) >= 2
    for line in request_lines:
        assert line["request_id"].startswith("apigw-")
        assert line["connection_id"] == "m1"
        assert line["lambda_request_id"] == "lambda-req-1"
