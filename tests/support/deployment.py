"""A wsfleet deployment on the moto server: the tables and the hint queue created with the
adapters' own helpers, and the WSFLEET_* environment that points a process at them."""

import asyncio
from typing import Any

from aiobotocore.session import get_session

from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from adapters.sqs import create_queue
from tests.support.moto import MotoEndpoint

QUEUE_NAME = "wsfleet-hints"


async def create_deployment(moto: MotoEndpoint) -> dict[str, str]:
    session = get_session()
    kwargs: dict[str, Any] = {"endpoint_url": moto.url, "region_name": moto.region}
    async with session.create_client("dynamodb", **kwargs) as dynamodb:
        await create_tables(dynamodb, TableNames())
    async with session.create_client("sqs", **kwargs) as sqs:
        queue_url = await create_queue(sqs, QUEUE_NAME, visibility_timeout_s=30)
    return {
        "WSFLEET_BACKEND": "aws",
        "WSFLEET_AWS_ENDPOINT_URL": moto.url,
        "WSFLEET_REGION": moto.region,
        "WSFLEET_QUEUE_URL": queue_url,
    }


def create_deployment_sync(moto: MotoEndpoint) -> dict[str, str]:
    """For synchronous tests (the Lambda handler runs its own event loop)."""
    return asyncio.run(create_deployment(moto))
