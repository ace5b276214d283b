"""Hostile upstreams: `/hostile/<kind>/<id>` on the simulator's port plays a stream that behaves
for a few messages and then breaks the message contract in one way (docs/decisions.md, "What
an upstream may send"). Tests serve them next to good streams and judge that each costs only
its own connection.

Every kind sends `{"seq": n, "data": "<id>:<n>"}` from the requested seq, GOOD_FIRST of them
(at `rate` per second), then:

- faults (the worker must give the connection up, with back-off): see FAULTS;
- tolerated misbehaviour (the worker must store the stream as if nothing happened): see
  TOLERATED — a replay going backwards, a ping flood.
"""

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import suppress

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

GOOD_FIRST = 5
SLOW_HANDSHAKE_S = 5.0

FAULTS = (
    "huge",  # one frame larger than any worker accepts
    "fragments",  # a message in fragments that never ends
    "invalid-utf8",  # a text frame that is not UTF-8
    "binary",  # a binary frame of bytes that are not text
    "non-json",  # a line of text in a sequenced stream
    "seq-max",  # seq 2^63
    "seq-negative",
    "seq-string",
    "seq-float",
    "seq-jump",  # seq 10^15
    "seq-bogus-jump",  # one seq far ahead but inside the window, then the real stream goes on
    "replay-different",  # the last seq this connection sent, again, with other content
    "deep-json",  # a message whose data nests 5,000 deep (beyond the JSON parser's recursion)
    "deep-brackets",  # 5,000 opening brackets
    "slow-handshake",  # the HTTP upgrade answered after SLOW_HANDSHAKE_S
)
TOLERATED = ("seq-backwards", "ping-flood")
BOGUS_JUMP = 900_000  # ahead of the next seq, inside WSFLEET_SEQ_JUMP_WINDOW's default
# Faults on every connect, after progress: one good message (the next seq), then a jump far
# beyond the window. The back-off must grow across connects, not restart at its first step.
REPEATING = ("jump-per-connect",)
KINDS = FAULTS + TOLERATED + REPEATING


def message(stream_id: str, seq: object, data: str | None = None) -> str:
    return json.dumps({"seq": seq, "data": f"{stream_id}:{seq}" if data is None else data})


async def play(ws: ServerConnection, kind: str, stream_id: str, from_seq: int, rate: float) -> None:
    """Send the stream of `kind` until the subscriber leaves."""
    with suppress(ConnectionClosed):
        if kind == "jump-per-connect":
            await ws.send(message(stream_id, max(1, from_seq)))
            await ws.send(message(stream_id, 2**62))
            await ws.wait_closed()
            return
        for seq in itertools.count(max(1, from_seq)):
            if seq == _misbehaves_at(kind, from_seq):
                await _misbehave(ws, kind, stream_id, seq)
            await ws.send(message(stream_id, seq))
            await asyncio.sleep(1 / rate)


def _misbehaves_at(kind: str, from_seq: int) -> int:
    """The seq before which the stream misbehaves: after GOOD_FIRST. A replay with other
    content is a fault only to a subscriber that received the first copy (a worker that resumed
    past it drops it as a replay of what is stored, without comparing: admission.py), so a
    connection resumed at or past GOOD_FIRST + 1 (its last owner moved it on between seq 5 and
    seq 6) sends one good message first and replays that."""
    if kind == "replay-different":
        return max(GOOD_FIRST + 1, from_seq + 1)
    return GOOD_FIRST + 1


async def _misbehave(ws: ServerConnection, kind: str, stream_id: str, seq: int) -> None:
    match kind:
        case "huge":
            await ws.send(message(stream_id, seq, "x" * (4 * 2**20)))
        case "fragments":
            await ws.send(_endless())
        case "invalid-utf8":
            await ws.send(b'{"seq": 6, "data": "\xff\xfe"}', text=True)
        case "binary":
            await ws.send(b"\x00\xff\x80\x81" * 16)
        case "non-json":
            await ws.send("<html>not what you asked for</html>")
        case "seq-max":
            await ws.send(message(stream_id, 2**63))
        case "seq-negative":
            await ws.send(message(stream_id, -1))
        case "seq-string":
            await ws.send(message(stream_id, str(seq)))
        case "seq-float":
            await ws.send(message(stream_id, seq + 0.5))
        case "seq-jump":
            await ws.send(message(stream_id, 10**15))
        case "seq-bogus-jump":
            await ws.send(message(stream_id, seq + BOGUS_JUMP))
        case "deep-json":
            await ws.send(f'{{"seq": {seq}, "data": {"[" * 5_000}{"]" * 5_000}}}')
        case "deep-brackets":
            await ws.send("[" * 5_000)
        case "seq-backwards":
            for old in range(seq - 1, 0, -1):
                await ws.send(message(stream_id, old))
        case "replay-different":
            await ws.send(message(stream_id, seq - 1, "other content"))
        case "ping-flood":
            for _ in range(500):
                await ws.ping()


async def _endless() -> AsyncIterator[str]:
    while True:
        yield "x" * 65_536
        await asyncio.sleep(0)
