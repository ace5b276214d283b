"""Translation of DynamoDB failures into the ports' errors, in one place.

- A failed condition (`ConditionalCheckFailedException`, or a transaction cancelled for a
  `ConditionalCheckFailed` reason) is not an error: the adapters catch it where they make the
  conditional write and turn it into the port's outcome. It is never logged as an error.
- Throttling, server-side errors (5xx) and transport failures (refused, reset, timed out) become
  the port's "unavailable" error (`StoreUnavailable`, `SinkUnavailable`): the outcome of a write
  is unknown. botocore's standard retry mode (configured by the composition root) has already
  retried them with jittered back-off; what reaches us is what remained.
- Everything else (a missing table, denied access, a malformed request) is a deployment or
  programming error and is re-raised unchanged, loudly.
"""

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import aiohttp
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from application.errors import ApplicationError

CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELED = "TransactionCanceledException"
TRANSACTION_CONFLICT = "TransactionConflictException"

# Cancellation reason codes of TransactWriteItems, one per item in request order.
REASON_NONE = "None"
REASON_CONDITION_FAILED = "ConditionalCheckFailed"
REASON_CONFLICT = "TransactionConflict"
REASON_THROTTLED = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})

THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",  # an idempotent transaction still running: retry
        "InternalServerError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)

# Transport failures as aiobotocore raises them (it wraps aiohttp's), plus the raw ones it
# may let through; TimeoutError covers asyncio timeouts inside the HTTP stack.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    BotoConnectionError,
    HTTPClientError,
    aiohttp.ClientError,
    TimeoutError,
)


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def is_transient(exc: ClientError) -> bool:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return error_code(exc) in THROTTLING_CODES or status >= 500


def failed_item(exc: ClientError) -> Mapping[str, Any] | None:
    """The item that refused a conditional write (ReturnValuesOnConditionCheckFailure=ALL_OLD);
    None if the item does not exist."""
    return cast(Mapping[str, Any], exc.response).get("Item")


def cancellation_reasons(exc: ClientError) -> Sequence[Mapping[str, Any]]:
    return cast(Sequence[Mapping[str, Any]], exc.response.get("CancellationReasons", []))


@contextmanager
def unavailable_as(error: type[ApplicationError], what: str) -> Iterator[None]:
    """Run DynamoDB calls, translating what is transient into `error`; re-raise the rest."""
    try:
        yield
    except ClientError as exc:
        if not is_transient(exc):
            raise
        raise error(f"DynamoDB {what} failed: {error_code(exc) or 'server error'}") from exc
    except NETWORK_ERRORS as exc:
        raise error(f"DynamoDB {what} failed: {type(exc).__name__}: {exc}") from exc
