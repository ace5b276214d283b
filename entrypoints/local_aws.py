"""`python -m entrypoints.local_aws --endpoint-url http://127.0.0.1:5000`: create wsfleet's
tables and hint queue on a local AWS emulator (a moto server; with `--dynamodb-endpoint-url`,
the tables on DynamoDB Local instead) with the adapters' own definitions, then print the
environment that points a worker or the router at them (`eval "$(...)"`). On AWS the same
resources come from infra/ (Terraform)."""

import argparse
import asyncio
import shlex
import sys

import aioboto3
from botocore.exceptions import EndpointConnectionError

from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from adapters.sqs import create_queue
from adapters.sqs.schema import DEFAULT_QUEUE_NAME, DEFAULT_VISIBILITY_TIMEOUT_S


async def provision(
    endpoint_url: str, region: str, queue_name: str, dynamodb_endpoint_url: str | None = None
) -> dict[str, str]:
    session = aioboto3.Session()
    dynamodb_at = dynamodb_endpoint_url or endpoint_url
    async with session.client("dynamodb", endpoint_url=dynamodb_at, region_name=region) as db:
        await create_tables(db, TableNames())
    async with session.client("sqs", endpoint_url=endpoint_url, region_name=region) as sqs:
        queue_url = await create_queue(sqs, queue_name, DEFAULT_VISIBILITY_TIMEOUT_S)
    env = {
        "WSFLEET_BACKEND": "aws",
        "WSFLEET_AWS_ENDPOINT_URL": endpoint_url,
        "WSFLEET_REGION": region,
        "WSFLEET_QUEUE_URL": queue_url,
    }
    if dynamodb_endpoint_url:
        env["WSFLEET_DYNAMODB_ENDPOINT_URL"] = dynamodb_endpoint_url
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entrypoints.local_aws", description=__doc__)
    parser.add_argument("--endpoint-url", required=True, help="e.g. http://127.0.0.1:5000")
    parser.add_argument(
        "--dynamodb-endpoint-url", help="DynamoDB Local, e.g. http://127.0.0.1:8000 (optional)"
    )
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--queue-name", default=DEFAULT_QUEUE_NAME)
    args = parser.parse_args(argv)
    try:
        env = asyncio.run(
            provision(args.endpoint_url, args.region, args.queue_name, args.dynamodb_endpoint_url)
        )
    except (EndpointConnectionError, OSError) as exc:
        print(f"cannot reach the endpoints: {exc}", file=sys.stderr)
        return 1
    for name, value in env.items():
        print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
