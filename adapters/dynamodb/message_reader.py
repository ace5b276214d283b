"""Reading the messages table back: which seqs of a connection are stored.

The sink port only writes; operators and judges (the demo, end-to-end tests) need to read.
One strongly consistent Query per connection, keys only, every page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.dynamodb import schema
from adapters.dynamodb.errors import unavailable_as
from application.errors import SinkUnavailable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient


class DynamoDbMessageReader:
    def __init__(self, client: DynamoDBClient, table: str = schema.DEFAULT_MESSAGES_TABLE) -> None:
        self._client = client
        self._table = table

    async def seqs(self, connection_id: str) -> list[int]:
        """The stored seqs of a connection, ascending. Raises SinkUnavailable."""
        found: list[int] = []
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "#pk = :pk",
                "ProjectionExpression": "#sk",
                "ExpressionAttributeNames": {"#pk": schema.PK, "#sk": schema.SK},
                "ExpressionAttributeValues": {":pk": {"S": schema.connection_key(connection_id)}},
                "ConsistentRead": True,
            }
            if start:
                request["ExclusiveStartKey"] = start
            with unavailable_as(SinkUnavailable, "message read"):
                response = await self._client.query(**request)
            found.extend(int(item[schema.SK]["N"]) for item in response["Items"])
            start = response.get("LastEvaluatedKey")
            if not start:
                return found
