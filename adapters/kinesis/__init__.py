"""Kinesis Data Streams: a message sink (PutRecords) and its reader, on aioboto3. The names
below are imported when first used (adapters/lazy.py)."""

from typing import TYPE_CHECKING

from adapters.lazy import exports

if TYPE_CHECKING:
    from adapters.kinesis.message_reader import KinesisMessageReader
    from adapters.kinesis.message_sink import KinesisMessageSink
    from adapters.kinesis.records import messages_of, records_of
    from adapters.kinesis.streams import create_stream

__all__ = [
    "KinesisMessageReader",
    "KinesisMessageSink",
    "create_stream",
    "messages_of",
    "records_of",
]

if not TYPE_CHECKING:  # mypy reads the imports above, and refuses any other name
    __getattr__ = exports(
        __name__,
        {
            "KinesisMessageReader": "message_reader",
            "KinesisMessageSink": "message_sink",
            "create_stream": "streams",
            "messages_of": "records",
            "records_of": "records",
        },
    )
