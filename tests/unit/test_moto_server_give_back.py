"""entrypoints/devstack/moto_server.py makes moto's SQS wake a queue's waiting long polls when a
message is made visible again (a hint given back), as SQS does; moto alone looks again only
once a second, which added up to a second to every handoff that gave a hint back."""

import threading

import boto3
import pytest
from moto import mock_aws
from moto.sqs.models import SQSBackend, sqs_backends

from entrypoints.devstack.moto_server import wake_long_polls_on_give_back

REGION = "us-east-1"


def test_a_message_given_back_wakes_a_waiting_long_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    # Restored after the test: the patch is the moto server process's, not the test run's.
    monkeypatch.setattr(
        SQSBackend, "change_message_visibility", SQSBackend.change_message_visibility
    )
    wake_long_polls_on_give_back()
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="hints")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="hint")
        (taken,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]
        queue = next(iter(sqs_backends.values()))[REGION].get_queue("hints")
        # What moto's long poll does between its looks: wait on the queue's condition until a
        # message is visible, here for longer than the join below will wait.
        waiter = threading.Thread(target=queue.wait_for_messages, args=(60,), daemon=True)
        waiter.start()

        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=taken["ReceiptHandle"], VisibilityTimeout=0
        )
        waiter.join(timeout=20)

        assert not waiter.is_alive(), "the waiting long poll was not woken"
