"""The tables as created from schema.py: keys, the sparse sharded orphan index, TTL."""

from typing import Any

from adapters.dynamodb import schema
from adapters.dynamodb.tables import create_tables, table_definitions
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import TABLES, dynamodb_client


async def test_create_tables_builds_the_schema_and_can_run_again(aws: LocalAws) -> None:
    async with dynamodb_client(aws) as client:
        await create_tables(client, TABLES)
        await create_tables(client, TABLES)  # existing tables are left alone

        connections = (await client.describe_table(TableName=TABLES.connections))["Table"]
        events = (await client.describe_table(TableName=TABLES.events))["Table"]
        ttl = await client.describe_time_to_live(TableName=TABLES.messages)

    assert _keys(connections) == [("pk", "HASH")]
    (index,) = connections["GlobalSecondaryIndexes"]
    assert index["IndexName"] == schema.ORPHAN_INDEX
    assert _keys(index) == [("orphan_shard", "HASH"), ("available_at_ms", "RANGE")]
    assert index["Projection"]["ProjectionType"] == "ALL"
    assert connections["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert _keys(events) == [("pk", "HASH"), ("sk", "RANGE")]
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires_at"
    assert ttl["TimeToLiveDescription"]["TimeToLiveStatus"] == "ENABLED"


def test_definitions_use_the_configured_names_and_only_schema_attributes() -> None:
    names = schema.TableNames("a", "b", "c")

    definitions = table_definitions(names)

    assert [d["TableName"] for d in definitions] == ["a", "b", "c"]
    declared = {a["AttributeName"] for d in definitions for a in d["AttributeDefinitions"]}
    assert declared == {schema.PK, schema.SK, schema.ORPHAN_SHARD, schema.AVAILABLE_AT_MS}


def _keys(table: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]]
