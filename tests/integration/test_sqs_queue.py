"""SqsNotificationQueue beyond the shared contract: retries of failed batch entries, error
translation, the article's body format and queue creation. Failures moto does not simulate
(throttling, entries failed by the server) come from a fault-injecting wrapper around the
real client."""

import json
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import aioboto3
import pytest
from aiobotocore.config import AioConfig
from botocore.exceptions import ClientError

from adapters.sqs import SqsNotificationQueue, create_queue
from adapters.sqs.schema import MAX_RECEIVE_COUNT
from application.errors import ConfigurationError, QueueUnavailable
from entrypoints.devstack.aws import LocalAws


@pytest.fixture
async def sqs(aws: LocalAws) -> AsyncIterator[Any]:
    async with aioboto3.Session().client(
        "sqs", endpoint_url=aws.moto_url, region_name=aws.region
    ) as client:
        yield client


@pytest.fixture
async def queue_url(sqs: Any) -> str:
    return await create_queue(sqs, "hints", visibility_timeout_s=30)


class FailingEntries:
    """A real SQS client whose batch calls report the entries `fails(entry)` picks as failed,
    without sending them, for the first `times` calls that pick any."""

    def __init__(self, client: Any, fails: Any, times: int, sender_fault: bool = False) -> None:
        self._client = client
        self._fails = fails
        self._times = times
        self._sender_fault = sender_fault
        self.batch_calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def send_message_batch(self, **kwargs: Any) -> Any:
        return await self._batch(self._client.send_message_batch, kwargs)

    async def delete_message_batch(self, **kwargs: Any) -> Any:
        return await self._batch(self._client.delete_message_batch, kwargs)

    async def _batch(self, call: Any, kwargs: dict[str, Any]) -> Any:
        self.batch_calls += 1
        failing = [e for e in kwargs["Entries"] if self._fails(e)] if self._times > 0 else []
        if failing:
            self._times -= 1
        passing = [e for e in kwargs["Entries"] if e not in failing]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if passing:
            response = await call(**{**kwargs, "Entries": passing})
        failed = [
            {"Id": e["Id"], "SenderFault": self._sender_fault, "Code": "InternalError"}
            for e in failing
        ]
        return {**response, "Failed": [*response.get("Failed", []), *failed]}


class Throttled:
    def __getattr__(self, name: str) -> Any:
        async def refuse(**kwargs: Any) -> Any:
            error: Any = {"Error": {"Code": "RequestThrottled", "Message": "slow down"}}
            raise ClientError(error, name)

        return refuse


def names(connection_id: str) -> Any:
    return lambda entry: connection_id in entry.get("MessageBody", "")


async def drain(queue: SqsNotificationQueue, expected: int) -> list[str | None]:
    got: list[str | None] = []
    for _ in range(20):
        if len(got) >= expected:
            break
        got.extend(d.connection_id for d in await queue.receive(max_messages=10, wait_s=1))
    return sorted(got, key=str)


async def test_entries_the_server_failed_are_resent_until_taken(sqs: Any, queue_url: str) -> None:
    flaky = FailingEntries(sqs, fails=names("c-03"), times=2)
    queue = SqsNotificationQueue(cast(Any, flaky), queue_url, retry_delay_s=0.001)
    sent = [f"c-{i:02d}" for i in range(15)]

    await queue.send(sent)

    assert await drain(queue, len(sent)) == sent


async def test_entries_still_failing_after_the_last_attempt_are_named(
    sqs: Any, queue_url: str
) -> None:
    flaky = FailingEntries(sqs, fails=names("c-03"), times=100)
    queue = SqsNotificationQueue(cast(Any, flaky), queue_url, batch_attempts=3, retry_delay_s=0.001)
    sent = [f"c-{i:02d}" for i in range(15)]

    with pytest.raises(QueueUnavailable, match=r"1 of 15 hints: c-03 \(InternalError"):
        await queue.send(sent)

    assert flaky.batch_calls == 3 + 1  # three for the first chunk of ten, one for the rest
    assert await drain(queue, len(sent) - 1) == [c for c in sent if c != "c-03"]


async def test_entries_refused_as_the_senders_fault_are_not_resent(
    sqs: Any, queue_url: str
) -> None:
    flaky = FailingEntries(sqs, fails=names("c-01"), times=100, sender_fault=True)
    queue = SqsNotificationQueue(cast(Any, flaky), queue_url, retry_delay_s=0.001)

    with pytest.raises(QueueUnavailable, match="c-01"):
        await queue.send(["c-01", "c-02"])

    assert flaky.batch_calls == 1


async def test_deletes_the_server_keeps_failing_raise_queue_unavailable(
    sqs: Any, queue_url: str
) -> None:
    queue = SqsNotificationQueue(sqs, queue_url)
    await queue.send(["c-01"])
    [delivery] = await queue.receive(max_messages=10, wait_s=1)
    flaky = FailingEntries(sqs, fails=lambda entry: True, times=100)
    failing = SqsNotificationQueue(cast(Any, flaky), queue_url, retry_delay_s=0.001)

    with pytest.raises(QueueUnavailable, match="did not delete 1 messages"):
        await failing.delete([delivery.receipt])


async def test_throttling_becomes_queue_unavailable(queue_url: str) -> None:
    queue = SqsNotificationQueue(cast(Any, Throttled()), queue_url)

    for operation in (
        queue.receive(max_messages=1, wait_s=0),
        queue.send(["c-01"]),
        queue.delete(["receipt"]),
    ):
        with pytest.raises(QueueUnavailable, match="RequestThrottled") as caught:
            await operation
        assert isinstance(caught.value.__cause__, ClientError)


async def test_a_missing_queue_is_not_disguised_as_an_outage(sqs: Any, aws: LocalAws) -> None:
    queue = SqsNotificationQueue(sqs, f"{aws.moto_url}/123456789012/no-such-queue")

    with pytest.raises(ClientError, match="does not exist"):
        await queue.receive(max_messages=1, wait_s=0)


async def test_an_unreachable_endpoint_becomes_queue_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = AioConfig(connect_timeout=1, retries={"mode": "standard", "total_max_attempts": 1})
    async with aioboto3.Session().client(
        "sqs", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1", config=config
    ) as client:
        queue = SqsNotificationQueue(client, f"http://127.0.0.1:{port}/123456789012/hints")

        with pytest.raises(QueueUnavailable):
            await queue.receive(max_messages=1, wait_s=0)
        with pytest.raises(QueueUnavailable):
            await queue.send(["c-01"])


async def test_the_articles_pk_body_is_understood(sqs: Any, queue_url: str) -> None:
    queue = SqsNotificationQueue(sqs, queue_url)
    await sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"pk": "CONN#meeting-7"}))

    [delivery] = await queue.receive(max_messages=10, wait_s=1)

    assert (delivery.connection_id, delivery.problem) == ("meeting-7", None)


async def test_requests_beyond_the_api_limits_are_capped(sqs: Any, queue_url: str) -> None:
    queue = SqsNotificationQueue(sqs, queue_url)
    await queue.send([f"c-{i:02d}" for i in range(12)])

    got = await queue.receive(max_messages=50, wait_s=0.5)

    assert 1 <= len(got) <= 10


async def test_created_queue_sends_repeatedly_failed_hints_to_a_dead_letter_queue(
    sqs: Any, queue_url: str
) -> None:
    attributes = (await sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"]))[
        "Attributes"
    ]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"].endswith(":hints-dlq")
    assert int(redrive["maxReceiveCount"]) == MAX_RECEIVE_COUNT
    assert attributes["VisibilityTimeout"] == "30"


def test_an_invalid_visibility_timeout_is_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="visibility_timeout_s"):
        SqsNotificationQueue(cast(Any, object()), "url", visibility_timeout_s=-1)


async def test_a_hint_given_back_more_often_than_the_dead_letter_limit_is_not_dead_lettered(
    sqs: Any, queue_url: str
) -> None:
    """A hint given back for want of room is not a failure: given back more often than the
    redrive policy's maxReceiveCount, it is still received (a visibility change would keep
    its receive count and dead-letter it), and a long poll waiting elsewhere gets it as a new
    message (moto wakes a waiting poll for a new message, not for a visibility change)."""
    queue = SqsNotificationQueue(sqs, queue_url, visibility_timeout_s=30)
    await queue.send(["c1"])

    for _ in range(MAX_RECEIVE_COUNT + 2):
        [delivery] = await queue.receive(10, wait_s=1)
        assert delivery.connection_id == "c1"
        await queue.release([delivery.receipt])

    [last] = await queue.receive(10, wait_s=1)
    assert last.connection_id == "c1"
    await queue.delete([last.receipt])
    assert await queue.receive(10, wait_s=0) == []


async def test_a_give_back_whose_send_fails_leaves_the_hint_to_come_back(
    sqs: Any, aws: LocalAws
) -> None:
    """Sent before deleted: if the new message cannot be sent, the received one must still be
    there, to come back when its visibility timeout ends, or the connection waits for a scan."""
    url = await create_queue(sqs, "give-back-send-fails", visibility_timeout_s=1)
    await SqsNotificationQueue(sqs, url).send(["c1"])
    flaky = FailingEntries(sqs, fails=names("c1"), times=100)
    queue = SqsNotificationQueue(
        cast(Any, flaky), url, visibility_timeout_s=1, batch_attempts=2, retry_delay_s=0.001
    )
    [delivery] = await queue.receive(10, wait_s=1)

    with pytest.raises(QueueUnavailable, match="c1"):
        await queue.release([delivery.receipt])

    assert await drain(queue, 1) == ["c1"]


async def test_a_hint_given_back_by_another_instance_is_visible_at_once(
    sqs: Any, queue_url: str
) -> None:
    """A receipt this instance did not receive is made visible again at once, not hidden for
    the visibility timeout (30 s here, longer than the receive below waits)."""
    await SqsNotificationQueue(sqs, queue_url).send(["c1"])
    receiver = SqsNotificationQueue(sqs, queue_url, visibility_timeout_s=30)
    [delivery] = await receiver.receive(10, wait_s=1)

    await SqsNotificationQueue(sqs, queue_url, visibility_timeout_s=30).release([delivery.receipt])

    [again] = await receiver.receive(10, wait_s=2)
    assert again.connection_id == "c1"
