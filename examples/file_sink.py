"""A message sink of your own: one JSON file per message, named by its seq.

Point a worker at it with

    WSFLEET_MESSAGE_SINK=examples.file_sink:create
    FILE_SINK_DIR=/var/lib/wsfleet-messages

The contract (application/ports/sink.py): `max_batch`, `max_message_bytes`,
`async resume_point(connection_id, checkpoint_seq)` (None here: see below), and
`async write(messages)` that stores every message durably before returning, idempotently on
(connection_id, seq) — the worker retries whole batches, and a new owner may re-read up to one
heartbeat of messages after a crash. Here idempotency comes from the file name: writing seq 42
twice replaces one file with an identical one. Blocking file I/O runs in a thread, never on the
event loop. A sink that forwards to Kinesis, Kafka or a transcription service has the same
shape: an idempotency key of (connection_id, seq), a batch per call, and SinkUnavailable when
the batch may not have been stored (the worker then retries it and holds the checkpoint back).
This example cannot say where a new owner resumes (`resume_point` returns None), so the worker
records checkpoints with the connection for it, at a low rate: a sink that keeps each message's
`prev_seq` and answers as the built-in ones do (the port's `follow_links`) saves those writes.
This example does not fence (SinkRefused for a stale token or other data for a stored seq):
the built-in sinks do, and a production sink should too.
"""

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from application.errors import SinkUnavailable
from application.ports import StoredMessage
from entrypoints.settings import Settings


class FileSink:
    max_batch = 100
    max_message_bytes = 16 * 2**20  # the largest message (UTF-8 bytes of data) it accepts

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        try:
            await asyncio.to_thread(self._write, messages)
        except OSError as exc:
            raise SinkUnavailable(f"cannot write to {self.directory}: {exc}") from exc

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int | None:
        return None  # cannot answer: the worker falls back to checkpoint writes

    def _write(self, messages: Sequence[StoredMessage]) -> None:
        for message in messages:
            folder = self.directory / message.connection_id
            folder.mkdir(parents=True, exist_ok=True)
            final = folder / f"{message.seq:012d}.json"
            temporary = final.with_suffix(".tmp")
            temporary.write_text(json.dumps(attrs.asdict(message)))
            os.replace(temporary, final)  # atomic: a reader never sees half a message

    def seqs(self, connection_id: str) -> list[int]:
        folder = self.directory / connection_id
        return sorted(int(p.stem) for p in folder.glob("*.json")) if folder.exists() else []


def create(settings: Settings) -> FileSink:
    """The factory named in WSFLEET_MESSAGE_SINK; it receives the worker's settings."""
    base = Path(os.environ.get("FILE_SINK_DIR", "wsfleet-messages"))
    return FileSink(base / settings.service_name)
