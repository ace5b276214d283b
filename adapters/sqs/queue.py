"""SqsNotificationQueue: the notification queue port on Amazon SQS, over an injected aioboto3
client (opened and closed by the composition root, one per process)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from adapters.sqs.errors import queue_errors
from adapters.sqs.messages import MalformedHint, decode_all, encode_hint
from adapters.sqs.schema import (
    DEFAULT_VISIBILITY_TIMEOUT_S,
    MAX_BATCH,
    MAX_VISIBILITY_TIMEOUT_S,
    MAX_WAIT_S,
)
from application.errors import ConfigurationError, QueueUnavailable
from application.ports.queue import Delivery, HintOrigin, check_delay

if TYPE_CHECKING:
    from types_aiobotocore_sqs.client import SQSClient
    from types_aiobotocore_sqs.type_defs import BatchResultErrorEntryTypeDef as Failure
    from types_aiobotocore_sqs.type_defs import MessageTypeDef

    BatchCall = Callable[[list[str]], Awaitable[Sequence[Failure]]]

log = logging.getLogger(__name__)

_NAMED_FAILURES = 10  # how many failed hints an error message lists by name
# Hints received and neither deleted nor given back yet, remembered by receipt so a given-back
# hint can be sent again as a new message (see `release`). Bounded: a worker holds at most a
# few batches at once; beyond this, the oldest fall back to a visibility change.
_REMEMBERED = 1_000


class SqsNotificationQueue:
    """Long-poll receive, batched send and delete; malformed bodies come back as problems.

    The client's read timeout must exceed the 20 s long poll (aiobotocore's default, 60 s, does).
    `visibility_timeout_s` is sent with every receive, so the queue's own default never decides.
    Entries a batch call reports as failed on the server's side are re-sent up to
    `batch_attempts` times in all, with jittered back-off; sender faults are not re-sent.
    """

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        *,
        visibility_timeout_s: int = DEFAULT_VISIBILITY_TIMEOUT_S,
        batch_attempts: int = 3,
        retry_delay_s: float = 0.05,
    ) -> None:
        if not 0 <= visibility_timeout_s <= MAX_VISIBILITY_TIMEOUT_S:
            raise ConfigurationError(
                f"visibility_timeout_s must be 0-{MAX_VISIBILITY_TIMEOUT_S}, "
                f"got {visibility_timeout_s}"
            )
        if batch_attempts < 1:
            raise ConfigurationError(f"batch_attempts must be at least 1, got {batch_attempts}")
        self._client = client
        self._queue_url = queue_url
        self._visibility_timeout_s = visibility_timeout_s
        self._batch_attempts = batch_attempts
        self._retry_delay_s = retry_delay_s
        # receipt -> what it delivered, oldest first: a give-back sends the same hint again
        self._received: dict[str, Delivery] = {}

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        check_delay(delay_s)
        refused: list[str] = []
        for start in range(0, len(connection_ids), MAX_BATCH):
            chunk = {str(i): cid for i, cid in enumerate(connection_ids[start : start + MAX_BATCH])}

            async def call(ids: list[str], chunk: dict[str, str] = chunk) -> Sequence[Failure]:
                response = await self._client.send_message_batch(
                    QueueUrl=self._queue_url,
                    Entries=[
                        {
                            "Id": i,
                            "MessageBody": encode_hint(chunk[i], copy=copy, origin=origin),
                            "DelaySeconds": delay_s,
                        }
                        for i in ids
                    ],
                )
                return response.get("Failed", [])

            for failure in await self._batch("SendMessageBatch", list(chunk), call):
                refused.append(f"{chunk[failure['Id']]} ({_describe(failure)})")
        if refused:
            raise QueueUnavailable(
                f"SQS did not take {len(refused)} of {len(connection_ids)} hints: "
                + _listing(refused)
            )

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        # SQS waits in whole seconds: round down so the call never outlasts the caller's wait.
        with queue_errors("ReceiveMessage"):
            response = await self._client.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=min(MAX_BATCH, max(1, max_messages)),
                WaitTimeSeconds=min(MAX_WAIT_S, max(0, int(wait_s))),
                VisibilityTimeout=self._visibility_timeout_s,
            )
        deliveries = [_delivery(m) for m in response.get("Messages", []) if m.get("ReceiptHandle")]
        for delivery in deliveries:
            if delivery.connection_id is not None:
                self._received[delivery.receipt] = delivery
        while len(self._received) > _REMEMBERED:
            del self._received[next(iter(self._received))]
        return deliveries

    async def release(self, receipts: Sequence[str]) -> None:
        """Give hints back for another consumer: each is sent again as a new message and the
        received one deleted. A new message wakes a waiting long poll at once and starts its
        receive count afresh: a hint given back for want of room is not a failure, and must
        not be dead-lettered after `maxReceiveCount` give-backs (a visibility change keeps the
        count; on moto it also reaches a waiting long poll only on its next one-second look:
        docs/decisions.md). A receipt not remembered (or a malformed hint's) is made visible
        again instead. If the send fails, nothing is deleted (the hint comes back when its
        visibility timeout ends); if the delete fails, the hint is there twice (harmless).
        Sent again as it was: a copy stays a copy, and its origin stays with it (a give-back
        once dropped both, and a taker then counted a handed-off connection twice)."""
        known = [r for r in dict.fromkeys(receipts) if r in self._received]
        alike: dict[tuple[bool, HintOrigin | None], list[str]] = {}
        for r in known:
            hint = self._received[r]
            assert hint.connection_id is not None  # only valid hints are remembered
            alike.setdefault((hint.copy, hint.origin), []).append(hint.connection_id)
        for (copy, origin), ids in alike.items():
            await self.send(ids, copy=copy, origin=origin)
        if known:
            await self.delete(known)
        await self._make_visible([r for r in receipts if r not in set(known)])

    async def _make_visible(self, receipts: Sequence[str]) -> None:
        """ChangeMessageVisibilityBatch to 0: visible to every consumer again."""

        async def call(entries: dict[str, str], ids: list[str]) -> Sequence[Failure]:
            response = await self._client.change_message_visibility_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": i, "ReceiptHandle": entries[i], "VisibilityTimeout": 0} for i in ids
                ],
            )
            return response.get("Failed", [])

        await self._per_receipt("ChangeMessageVisibilityBatch", "release", receipts, call)

    async def delete(self, receipts: Sequence[str]) -> None:
        for receipt in receipts:
            self._received.pop(receipt, None)

        async def call(entries: dict[str, str], ids: list[str]) -> Sequence[Failure]:
            response = await self._client.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[{"Id": i, "ReceiptHandle": entries[i]} for i in ids],
            )
            return response.get("Failed", [])

        await self._per_receipt("DeleteMessageBatch", "delete", receipts, call)

    async def _per_receipt(
        self,
        operation: str,
        verb: str,
        receipts: Sequence[str],
        call: Callable[[dict[str, str], list[str]], Awaitable[Sequence[Failure]]],
    ) -> None:
        # SQS refuses a batch whose entries repeat a receipt; a repeat changes nothing more.
        unique = list(dict.fromkeys(r for r in receipts if r))
        unavailable: list[str] = []
        for start in range(0, len(unique), MAX_BATCH):
            chunk = {str(i): r for i, r in enumerate(unique[start : start + MAX_BATCH])}

            async def bound(ids: list[str], chunk: dict[str, str] = chunk) -> Sequence[Failure]:
                return await call(chunk, ids)

            for failure in await self._batch(operation, list(chunk), bound):
                if failure["SenderFault"]:
                    # A stale receipt (redelivered or already deleted) or one that never was.
                    log.debug("ignored SQS receipt: %s", _describe(failure))
                else:
                    unavailable.append(_describe(failure))
        if unavailable:
            raise QueueUnavailable(
                f"SQS did not {verb} {len(unavailable)} messages: " + _listing(unavailable)
            )

    async def _batch(self, operation: str, ids: list[str], call: BatchCall) -> list[Failure]:
        """Call with every entry id, then again with those that failed on the server's side,
        up to `batch_attempts` calls. Returns the failures that remain."""
        pending = ids
        failed: list[Failure] = []
        for attempt in range(self._batch_attempts):
            if attempt:
                await asyncio.sleep(self._retry_delay_s * 2**attempt * random.uniform(0.5, 1.5))
            with queue_errors(operation):
                failures = await call(pending)
            failed.extend(f for f in failures if f["SenderFault"])
            retryable = [f for f in failures if not f["SenderFault"]]
            if not retryable:
                return failed
            pending = [f["Id"] for f in retryable]
        return failed + retryable


def _describe(failure: Failure) -> str:
    return f"{failure['Code']}: {failure.get('Message', '')}".rstrip(": ")


def _listing(items: list[str]) -> str:
    more = len(items) - _NAMED_FAILURES
    return ", ".join(items[:_NAMED_FAILURES]) + (f" and {more} more" if more > 0 else "")


def _delivery(message: MessageTypeDef) -> Delivery:
    receipt = message.get("ReceiptHandle", "")
    try:
        connection_id, copy, origin = decode_all(message.get("Body", ""))
        return Delivery(receipt, connection_id, copy=copy, origin=origin)
    except MalformedHint as exc:
        return Delivery(receipt=receipt, connection_id=None, problem=str(exc))
