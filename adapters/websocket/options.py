"""Settings of the WebSocket connector, validated once at start-up.

Defaults are sized for thousands of connections per worker (websockets' own figures: about
14 KiB per connection with compression off, 64 KiB with it on; the incoming queue can hold up
to max_size x max_queue): compression off, a 1 MiB message limit, a 4-frame queue.
"""

import ssl
from asyncio import sslproto
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from application.errors import ConfigurationError

# The TLS read buffer of a direct wss:// connection (tls_buffer.py; here, not there, so that
# the settings table reads these without importing websockets). Messages of a few hundred
# bytes to a few KiB (the fleet's upstreams) take one read each; a 1 MiB message takes 256 (64
# at 16 KiB). Measured: see bench/RESULTS.md, section 8.
DEFAULT_TLS_READ_BUFFER = 4 * 1024
# Below a TLS record's header and a few bytes of data reads only multiply; above asyncio's own
# size nothing is gained.
MIN_TLS_READ_BUFFER = 1024
MAX_TLS_READ_BUFFER: int = sslproto.SSLProtocol.max_size

# Close codes after which reconnecting soon is pointless: the upstream (or this client) judged
# the data or the request unacceptable. 4400-4499 mirror HTTP's 4xx by convention (the upstream
# simulator closes with 4410 when a resume point fell out of its replay buffer).
DEFAULT_REJECTED_CLOSE_CODES = frozenset({1003, 1007, 1008, 1009, 1010, *range(4400, 4500)})


def _positive(instance: object, attribute: "attrs.Attribute[Any]", value: float | None) -> None:
    if value is not None and value <= 0:
        raise ConfigurationError(f"websocket {attribute.name} must be positive, got {value}")


def _not_blank(instance: object, attribute: "attrs.Attribute[Any]", value: str | None) -> None:
    if value is not None and not value.strip():
        raise ConfigurationError(f"websocket {attribute.name} must not be blank")


def _tls_read_buffer(value: int) -> None:
    if not MIN_TLS_READ_BUFFER <= value <= MAX_TLS_READ_BUFFER:
        raise ConfigurationError(
            f"websocket tls_read_buffer must be {MIN_TLS_READ_BUFFER}-{MAX_TLS_READ_BUFFER} "
            f"bytes, got {value}"
        )


def _header_pairs(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    pairs = tuple((str(k), str(v)) for k, v in items)
    for name, value in pairs:
        if not name or any(c in name for c in " :\r\n") or any(c in value for c in "\r\n"):
            raise ConfigurationError(f"websocket extra header {name!r} is not a valid header")
    return pairs


@attrs.frozen
class WebSocketOptions:
    # Resume: `?<resume_param>=<seq>` is added to the URL; None never adds it.
    resume_param: str | None = attrs.field(default="from_seq", validator=_not_blank)
    # The built-in parser reads JSON objects: the seq from `seq_field`; the whole frame is
    # stored unless `data_field` names the one field to keep (the whole text when a message
    # lacks it). A hook's `parse` replaces it.
    seq_field: str = attrs.field(default="seq", validator=_not_blank)
    data_field: str | None = attrs.field(default=None, validator=_not_blank)
    open_timeout: float = attrs.field(default=10.0, validator=_positive)
    ping_interval: float | None = attrs.field(default=20.0, validator=_positive)
    ping_timeout: float | None = attrs.field(default=20.0, validator=_positive)
    # Short, so a graceful shutdown never waits long for a slow upstream's closing handshake.
    close_timeout: float = attrs.field(default=2.0, validator=_positive)
    max_size: int = attrs.field(default=2**20, validator=_positive)
    max_queue: int = attrs.field(default=4, validator=_positive)
    compression: Literal["deflate"] | None = attrs.field(
        default=None, validator=attrs.validators.in_([None, "deflate"])
    )
    # TLS for wss://: verification is always on. `ca_file` adds a private CA bundle;
    # `ssl_context` replaces the whole context (it wins; do not set both).
    ca_file: str | None = None
    ssl_context: ssl.SSLContext | None = attrs.field(default=None, eq=False)
    # Bytes read from a wss:// socket at a time (asyncio's default is 256 KiB per connection,
    # kept for its life): per-connection memory against reads per large message.
    tls_read_buffer: int = attrs.field(
        default=DEFAULT_TLS_READ_BUFFER,
        validator=lambda _, __, value: _tls_read_buffer(value),
    )
    extra_headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_header_pairs)
    # True: HTTP(S)_PROXY / NO_PROXY from the environment; None: direct; or a proxy URL.
    proxy: str | Literal[True] | None = True
    user_agent: str | None = "wsfleet"
    normal_close_codes: frozenset[int] = frozenset({1000})
    rejected_close_codes: frozenset[int] = DEFAULT_REJECTED_CLOSE_CODES

    def __attrs_post_init__(self) -> None:
        if self.ca_file is not None and self.ssl_context is not None:
            raise ConfigurationError("set websocket ca_file or ssl_context, not both")
        if self.normal_close_codes & self.rejected_close_codes:
            raise ConfigurationError("a close code cannot be both normal and rejected")

    def build_ssl_context(self) -> ssl.SSLContext:
        """One verifying context shared by every wss:// connection (asyncio would otherwise
        build one per connection, reading the system CA store each time)."""
        if self.ssl_context is not None:
            return self.ssl_context
        try:
            return ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"websocket ca_file {self.ca_file!r}: {exc}") from exc
