"""The notification queue on Amazon SQS. The names below are imported when first used
(adapters/lazy.py)."""

from typing import TYPE_CHECKING

from adapters.lazy import exports

if TYPE_CHECKING:
    from adapters.sqs.queue import SqsNotificationQueue
    from adapters.sqs.queues import create_queue

__all__ = ["SqsNotificationQueue", "create_queue"]

if not TYPE_CHECKING:  # mypy reads the imports above, and refuses any other name
    __getattr__ = exports(__name__, {"SqsNotificationQueue": "queue", "create_queue": "queues"})
