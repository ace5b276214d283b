"""Kinesis Data Streams: a message sink (PutRecords) and its reader, on aioboto3."""

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
