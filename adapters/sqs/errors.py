"""Translation of SQS failures into the queue port's errors, in one place.

Mapped to QueueUnavailable: throttling, server-side errors (5xx) and transport failures
(refused, reset, timed out), which botocore has already retried. Everything else (a missing
queue, denied access, a bad parameter) is a deployment or programming error: re-raised as is,
loudly, rather than disguised as a passing outage.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from application.errors import QueueUnavailable

TRANSIENT_ERROR_CODES = frozenset(
    {
        "RequestThrottled",
        "ThrottlingException",
        "Throttling",
        "KmsThrottled",
        "OverLimit",  # too many in-flight messages: clears as consumers delete
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "RequestTimeout",
    }
)


def is_transient(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code in TRANSIENT_ERROR_CODES or status >= 500


@contextmanager
def queue_errors(operation: str) -> Iterator[None]:
    """Run an SQS call, translating what the port names; re-raise the rest."""
    try:
        yield
    except ClientError as exc:
        if not is_transient(exc):
            raise
        code = exc.response.get("Error", {}).get("Code", "?")
        raise QueueUnavailable(f"SQS {operation} failed: {code}") from exc
    except (HTTPClientError, BotoConnectionError) as exc:
        raise QueueUnavailable(f"SQS {operation} failed: {exc}") from exc
