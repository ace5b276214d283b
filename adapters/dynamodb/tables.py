"""The tables as data: CreateTable and UpdateTimeToLive arguments built from schema.py, so the
local endpoint (moto), the tests and the Terraform checks all read one definition.

`create_tables` is for local endpoints and tests; on AWS the tables come from infra/ (Terraform
mirrors `table_definitions`, and tests/infra compares the two). On-demand capacity: the load
follows the fleet's size, and nobody has to size the orphan index's write capacity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from adapters.dynamodb import schema
from adapters.dynamodb.errors import error_code
from adapters.dynamodb.schema import TableNames
from application.errors import ConfigurationError

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient


def _hash_and_range(hash_key: str, range_key: str | None = None) -> list[dict[str, str]]:
    keys = [{"AttributeName": hash_key, "KeyType": "HASH"}]
    if range_key:
        keys.append({"AttributeName": range_key, "KeyType": "RANGE"})
    return keys


def table_definitions(names: TableNames) -> list[dict[str, Any]]:
    """CreateTable keyword arguments for the connections, events, messages and sessions tables."""
    return [
        {
            "TableName": names.connections,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": _hash_and_range(schema.PK),
            "AttributeDefinitions": [
                {"AttributeName": schema.PK, "AttributeType": "S"},
                {"AttributeName": schema.ORPHAN_SHARD, "AttributeType": "S"},
                {"AttributeName": schema.NOT_BEFORE_MS, "AttributeType": "N"},
                {"AttributeName": schema.OWNED_BY, "AttributeType": "S"},
                {"AttributeName": schema.STOP_OWNER, "AttributeType": "S"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    # Sparse: only STARTED, unowned items carry orphan_shard, so it moves only
                    # when ownership does. ALL: reconciliation gets whole connections from it.
                    "IndexName": schema.ORPHAN_INDEX,
                    "KeySchema": _hash_and_range(schema.ORPHAN_SHARD, schema.NOT_BEFORE_MS),
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    # Sparse (owned items only). KEYS_ONLY: a checkpoint or a STOP of an owned
                    # connection changes no projected attribute, so it costs the index nothing;
                    # a dead session's connections are then read by key (rare).
                    "IndexName": schema.OWNER_INDEX,
                    "KeySchema": _hash_and_range(schema.OWNED_BY),
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                },
                {
                    # Sparse: only STOPPED items that are still owned. Ids are all a worker needs.
                    "IndexName": schema.STOP_INDEX,
                    "KeySchema": _hash_and_range(schema.STOP_OWNER),
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                },
            ],
        },
        {
            "TableName": names.events,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": _hash_and_range(schema.PK, schema.SK),
            "AttributeDefinitions": [
                {"AttributeName": schema.PK, "AttributeType": "S"},
                {"AttributeName": schema.SK, "AttributeType": "N"},
            ],
        },
        {
            "TableName": names.messages,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": _hash_and_range(schema.PK, schema.SK),
            "AttributeDefinitions": [
                {"AttributeName": schema.PK, "AttributeType": "S"},
                {"AttributeName": schema.SK, "AttributeType": "N"},
            ],
        },
        {
            # One small item per worker session: scanned whole by reconciliation.
            "TableName": names.sessions,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": _hash_and_range(schema.PK),
            "AttributeDefinitions": [{"AttributeName": schema.PK, "AttributeType": "S"}],
        },
    ]


def ttl_definitions(names: TableNames) -> list[dict[str, Any]]:
    """UpdateTimeToLive keyword arguments: only messages expire (when a retention is set)."""
    return [
        {
            "TableName": names.messages,
            "TimeToLiveSpecification": {"Enabled": True, "AttributeName": schema.EXPIRES_AT},
        }
    ]


async def create_tables(
    client: DynamoDBClient,
    names: TableNames | None = None,
    shards: int = schema.DEFAULT_ORPHAN_SHARDS,
) -> None:
    """Create the four tables and wait until they are active; tables that already exist are
    left as they are. `shards` is validated only: the shard is a value of the index key, so the
    tables do not depend on it (the same shard count must be configured in every process)."""
    if not 1 <= shards <= 100:
        raise ConfigurationError(f"orphan index shards must be 1-100, got {shards}")
    names = names or TableNames()
    for definition in table_definitions(names):
        try:
            await client.create_table(**definition)
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":  # it exists already
                raise
    waiter = client.get_waiter("table_exists")
    for definition in table_definitions(names):
        await waiter.wait(
            TableName=definition["TableName"], WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    for ttl in ttl_definitions(names):
        try:
            await client.update_time_to_live(**ttl)
        except ClientError as exc:
            if error_code(exc) != "ValidationException":  # "TimeToLive is already enabled"
                raise
