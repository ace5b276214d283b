"""Ports: what the use cases need from the outside world, one small protocol each."""

from application.ports.clock import Clock
from application.ports.metrics import Metrics
from application.ports.queue import Delivery, HintOrigin, NotificationQueue
from application.ports.sink import MessageReader, MessageSink, StoredMessage
from application.ports.store import CommandResult, ConnectionStore, SessionResult
from application.ports.upstream import UpstreamConnector, UpstreamMessage, UpstreamStream

__all__ = [
    "Clock",
    "CommandResult",
    "ConnectionStore",
    "Delivery",
    "HintOrigin",
    "MessageReader",
    "MessageSink",
    "Metrics",
    "NotificationQueue",
    "SessionResult",
    "StoredMessage",
    "UpstreamConnector",
    "UpstreamMessage",
    "UpstreamStream",
]
