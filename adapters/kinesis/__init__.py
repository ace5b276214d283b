"""Kinesis Data Streams: a message sink (PutRecords) and its reader, on aioboto3."""

from adapters.kinesis.message_reader import KinesisMessageReader
from adapters.kinesis.message_sink import KinesisMessageSink
from adapters.kinesis.records import record_of, stored_of

__all__ = ["KinesisMessageReader", "KinesisMessageSink", "record_of", "stored_of"]
