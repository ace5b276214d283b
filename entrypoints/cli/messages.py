"""`wsfleet messages ID`: a connection's stored messages, read back from the built-in sink.

One line per message in seq order: `seq`, the time it was received (UTC), the worker session
that received it, and its data; `--json` prints one JSON object per line (JSON Lines) with every
stored field. `--follow` keeps reading every `--interval` seconds and prints what arrived, from
the seq after the last one printed, until Ctrl-C. Read in pages of `--page`, so the first page
of a long stream prints without reading the rest. It opens the backend's read side, not its
container (entrypoints/read_side/), so the first page is not kept waiting for the worker's
imports.
"""

import argparse
import asyncio
import datetime
import json
from collections.abc import Mapping

from application.ports import StoredMessage
from domain import ConnectionNotFound
from entrypoints.cli.backend import command_settings
from entrypoints.read_side import open_read_side

EXIT_OK = 0


async def messages(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    settings = command_settings(env, writes=False)
    async with open_read_side(settings) as backend:
        store = await backend.store()
        if await store.get(args.connection_id) is None:
            raise ConnectionNotFound(f"connection {args.connection_id!r} was never started")
        reader = await backend.reader()
        next_seq = args.from_seq
        while True:
            page = await reader.messages(args.connection_id, next_seq, args.page)
            for message in page:
                print(_line(message, args.json), flush=True)
            if page:
                next_seq = page[-1].seq + 1
            if len(page) == args.page:
                continue
            if not args.follow:
                return EXIT_OK
            await asyncio.sleep(args.interval)


def _line(message: StoredMessage, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            {
                "connection_id": message.connection_id,
                "seq": message.seq,
                "prev_seq": message.prev_seq,
                "received_at_ms": message.received_at_ms,
                "worker_session": message.worker_id,
                "token": message.token,
                "data": message.data,
            },
            ensure_ascii=False,
        )
    received = datetime.datetime.fromtimestamp(message.received_at_ms / 1000, datetime.UTC)
    stamp = received.isoformat(timespec="milliseconds")
    return f"{message.seq}\t{stamp}\t{message.worker_id}\t{message.data}"
