"""The simulator's URL scheme, parsed and validated before the handshake is accepted.

WebSocket:  /stream/<id>   subscribe          ?from_seq=N  replay from N (inclusive)
            /flaky/<id>    the same stream, but the connection is aborted (no close frame)
                           every `drop_after` seconds (query, default from the simulator)
            /refuse/<id>   HTTP 403 at the handshake
            Creation-time query (first use of a stream only): ?rate=R (msg/s), ?total=N.
            Per subscriber: ?pad=N adds N bytes of padding to each message (size tests).
"""

import math
import re
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit

import attrs

STREAM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
MAX_PAD = 16 * 2**20
N = TypeVar("N", int, float)


class BadRequest(ValueError):
    pass


@attrs.frozen
class Subscription:
    stream_id: str
    flaky: bool = False
    from_seq: int | None = None
    rate: float | None = None
    total: int | None = None
    pad: int = 0
    drop_after_s: float | None = None


def split(path: str) -> tuple[list[str], dict[str, str]]:
    parts = urlsplit(path)
    segments = [s for s in parts.path.split("/") if s]
    return segments, dict(parse_qsl(parts.query))


def stream_id(value: str) -> str:
    if not STREAM_ID.fullmatch(value):
        raise BadRequest(f"invalid stream id {value[:64]!r}")
    return value


def parse_subscription(segments: list[str], query: dict[str, str]) -> Subscription:
    """Raises BadRequest; `segments` is ["stream" | "flaky", id]."""
    return Subscription(
        stream_id=stream_id(segments[1]),
        flaky=segments[0] == "flaky",
        from_seq=_number(query, "from_seq", int, minimum=0),
        rate=_number(query, "rate", float, minimum=1e-6),
        total=_number(query, "total", int, minimum=1),
        pad=_number(query, "pad", int, minimum=0, maximum=MAX_PAD) or 0,
        drop_after_s=_number(query, "drop_after", float, minimum=1e-3),
    )


def parse_creation(query: dict[str, str]) -> tuple[float | None, int | None]:
    return _number(query, "rate", float, minimum=1e-6), _number(query, "total", int, minimum=1)


def _number(
    query: dict[str, str], name: str, kind: type[N], minimum: N, maximum: N | None = None
) -> N | None:
    if name not in query:
        return None
    try:
        value = kind(query[name])
    except ValueError:
        raise BadRequest(f"{name} must be a number, got {query[name][:32]!r}") from None
    if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
        raise BadRequest(f"{name}={value} is out of range")
    return value
