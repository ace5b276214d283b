"""The deaths Lambda, driven with synthetic EventBridge "ECS Task State Change" events against
the local AWS (DynamoDB Local or moto, SQS on moto; tables and queue by the adapters' helpers).
Synchronous tests: the handler runs its own event loop, as in a Lambda container."""

import asyncio
import copy
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.schema import TableNames
from domain import WorkerSession
from entrypoints.devstack.aws import LocalAws
from entrypoints.lambda_deaths import handler as deaths_handler
from tests.support.apigw import LambdaContext
from tests.support.aws import reset
from tests.support.deployment import create_deployment_sync
from tests.support.dynamodb import dynamodb_client
from tests.support.logs import preserved_logging

CLUSTER = "arn:aws:ecs:us-east-1:123456789012:cluster/wsfleet"
SERVICE = "wsfleet-worker"
TASK = "0123456789abcdef0123456789abcdef"
VICTIM = f"{TASK}-0badcafe"  # the worker id the task's container chose
OTHER = "fedcba9876543210fedcba9876543210-1234abcd"
URL = "ws://127.0.0.1:9/stream/feed"
LEASE = 30_000

STOPPED: dict[str, Any] = {
    "version": "0",
    "id": "3317b2af-7005-947d-b652-f55e762e571a",
    "detail-type": "ECS Task State Change",
    "source": "aws.ecs",
    "account": "123456789012",
    "time": "2026-12-01T19:00:00Z",
    "region": "us-east-1",
    "resources": [f"arn:aws:ecs:us-east-1:123456789012:task/wsfleet/{TASK}"],
    "detail": {
        "clusterArn": CLUSTER,
        "taskArn": f"arn:aws:ecs:us-east-1:123456789012:task/wsfleet/{TASK}",
        "group": f"service:{SERVICE}",
        "lastStatus": "STOPPED",
        "desiredStatus": "STOPPED",
        "stopCode": "EssentialContainerExited",
        "stoppedReason": "Essential container in task exited",
    },
}


def _store_call(aws: LocalAws, call: Any) -> Any:
    async def run() -> Any:
        async with dynamodb_client(aws) as client:
            return await call(DynamoDbConnectionStore(client, tables=TableNames()))

    return asyncio.run(run())


def _now() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def deployment(aws_session: LocalAws) -> Iterator[dict[str, str]]:
    reset(aws_session)
    with preserved_logging():
        yield create_deployment_sync(aws_session)
        deaths_handler.close()


@pytest.fixture
def stack(
    aws_session: LocalAws, deployment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> LocalAws:
    for name in [n for n in os.environ if n.startswith("WSFLEET_")]:
        monkeypatch.delenv(name)
    for name, value in deployment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WSFLEET_WORKER_CLUSTER_ARN", CLUSTER)
    monkeypatch.setenv("WSFLEET_WORKER_SERVICE", SERVICE)

    async def hold(store: DynamoDbConnectionStore) -> None:
        # Fresh ids per test: the module's tables are shared.
        for sid, cids in ((f"{VICTIM}#1", ["a", "b"]), (f"{OTHER}#1", ["c"])):
            if await store.get_session(sid) is None:
                await store.open_session(sid, LEASE, 10, _now())
            for cid in cids:
                await store.start(cid, URL, _now())
                await store.try_acquire(cid, sid, _now())

    _store_call(aws_session, hold)
    _hints(aws_session, deployment)  # empty the queue
    return aws_session


def _sessions(aws: LocalAws) -> dict[str, WorkerSession]:
    async def read(store: DynamoDbConnectionStore) -> dict[str, WorkerSession]:
        return {s.session_id: s for s in await store.list_sessions()}

    found: dict[str, WorkerSession] = _store_call(aws, read)
    return found


def _hints(aws: LocalAws, deployment: dict[str, str]) -> list[str]:
    sqs = boto3.client("sqs", endpoint_url=aws.moto_url, region_name=aws.region)
    url, found = deployment["WSFLEET_QUEUE_URL"], list[str]()
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages"
        )
        if not messages:
            return sorted(found)
        found += [json.loads(m["Body"])["connection_id"] for m in messages]
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _invoke(event: Any) -> dict[str, Any]:
    result: dict[str, Any] = deaths_handler.handler(event, LambdaContext())
    return result


def test_a_stopped_task_s_sessions_end_and_its_connections_are_hinted(
    stack: LocalAws, deployment: dict[str, str]
) -> None:
    result = _invoke(STOPPED)
    again = _invoke(STOPPED)  # EventBridge delivers at least once

    assert result["result"] == "ended"
    assert result["ended"] == [f"{VICTIM}#1"]
    assert result["hinted"] == 2
    assert again["ended"] == []
    sessions = _sessions(stack)
    victim = sessions[f"{VICTIM}#1"]
    assert victim.ended_reason == (
        "ECS task STOPPED: EssentialContainerExited Essential container in task exited"
    )
    assert sessions[f"{OTHER}#1"].is_live(_now())
    # Two rounds per delivery (application/hints.py: SECOND_ROUND_S), two deliveries.
    assert _hints(stack, deployment) == ["a"] * 4 + ["b"] * 4


# One test per kind (each case inside): the store is set up once, not once per case.
IGNORED = [
    {"detail": {"clusterArn": CLUSTER.replace("wsfleet", "another")}},
    {"detail": {"group": "service:another-service"}},
    {"detail": {"group": "family:wsfleet-worker"}},  # a task run outside the service
    {"detail": {"lastStatus": "RUNNING"}},
]
MALFORMED: list[Any] = [
    None,
    "STOPPED",
    {"source": "aws.ec2", "detail-type": "ECS Task State Change", "detail": {}},
    {**STOPPED, "detail": "not an object"},
    {**STOPPED, "detail": {k: v for k, v in STOPPED["detail"].items() if k != "taskArn"}},
    {**STOPPED, "detail": {**STOPPED["detail"], "taskArn": "arn:aws:ecs:x:1:task/../etc"}},
    {**STOPPED, "detail": {**STOPPED["detail"], "lastStatus": 7}},
    {
        **STOPPED,
        "detail": {
            **STOPPED["detail"],
            "taskArn": STOPPED["detail"]["taskArn"].replace("/wsfleet/", "/other/"),
        },
    },
]


def test_an_event_about_another_service_or_status_is_ignored(
    stack: LocalAws, deployment: dict[str, str]
) -> None:
    before = _sessions(stack)

    results = [_invoke(_changed(change))["result"] for change in IGNORED]

    assert results == ["ignored"] * len(IGNORED)
    assert _sessions(stack) == before
    assert _hints(stack, deployment) == []


def test_a_malformed_event_is_logged_dropped_and_changes_nothing(
    stack: LocalAws, deployment: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    before = _sessions(stack)

    results = [_invoke(event)["result"] for event in MALFORMED]

    assert results == ["malformed"] * len(MALFORMED)
    assert caplog.text.count("malformed event dropped") == len(MALFORMED)
    assert _sessions(stack) == before
    assert _hints(stack, deployment) == []


def _changed(change: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(STOPPED)
    event["detail"].update(change["detail"])
    return event
