"""Queue creation for tests, the demo and local endpoints (production queues come from infra/,
with the same settings from schema.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from adapters.sqs.schema import (
    DLQ_SUFFIX,
    MAX_RECEIVE_COUNT,
    MAX_WAIT_S,
    MESSAGE_RETENTION_S,
)

if TYPE_CHECKING:
    from types_aiobotocore_sqs.client import SQSClient
    from types_aiobotocore_sqs.literals import QueueAttributeNameType


async def create_queue(
    client: SQSClient, name: str, visibility_timeout_s: int, with_dlq: bool = True
) -> str:
    """Create (or find, if it exists with the same settings) the hint queue; return its URL.
    With `with_dlq`, a `<name>-dlq` queue receives hints that were received
    MAX_RECEIVE_COUNT times without being deleted."""
    attributes: dict[QueueAttributeNameType, str] = {
        "VisibilityTimeout": str(visibility_timeout_s),
        "ReceiveMessageWaitTimeSeconds": str(MAX_WAIT_S),
        "MessageRetentionPeriod": str(MESSAGE_RETENTION_S),
    }
    if with_dlq:
        dlq_url = (await client.create_queue(QueueName=f"{name}{DLQ_SUFFIX}"))["QueueUrl"]
        dlq = await client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])
        attributes["RedrivePolicy"] = json.dumps(
            {
                "deadLetterTargetArn": dlq["Attributes"]["QueueArn"],
                "maxReceiveCount": MAX_RECEIVE_COUNT,
            }
        )
    return (await client.create_queue(QueueName=name, Attributes=attributes))["QueueUrl"]
