"""A wsfleet deployment on the session's local AWS: the tables (DynamoDB Local) and the hint
queue (moto) created with the adapters' own helpers, and the WSFLEET_* environment that points
a process at them."""

import asyncio

from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from adapters.sqs import create_queue
from entrypoints.devstack.aws import LocalAws, client

QUEUE_NAME = "wsfleet-hints"


async def create_deployment(aws: LocalAws) -> dict[str, str]:
    async with client("dynamodb", aws.dynamodb_url, region=aws.region) as db:
        await create_tables(db, TableNames())
    async with client("sqs", aws.moto_url, region=aws.region) as sqs:
        queue_url = await create_queue(sqs, QUEUE_NAME, visibility_timeout_s=30)
    return {**aws.env(), "WSFLEET_QUEUE_URL": queue_url}


def create_deployment_sync(aws: LocalAws) -> dict[str, str]:
    """For synchronous tests (the Lambda handler runs its own event loop)."""
    return asyncio.run(create_deployment(aws))
