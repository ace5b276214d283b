"""The notification queue on Amazon SQS."""

from adapters.sqs.queue import SqsNotificationQueue
from adapters.sqs.queues import create_queue

__all__ = ["SqsNotificationQueue", "create_queue"]
