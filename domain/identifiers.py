"""Validation of the values that cross into the domain from the outside world."""

import re
from urllib.parse import urlsplit

from domain.errors import InvalidCommand

# Safe in a DynamoDB key, a URL path, a file name and a log line; long enough for UUIDs and
# meeting ids with a prefix.
CONNECTION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
CONNECTION_ID_RULE = "1-128 characters of A-Z a-z 0-9 . _ : - (the first a letter or digit)"
MAX_URL_LENGTH = 2048
WS_SCHEMES = ("ws", "wss")


def validate_connection_id(connection_id: str) -> str:
    # fullmatch: with match(), "$" also matches before a trailing newline ("id\n" got in).
    if not CONNECTION_ID_PATTERN.fullmatch(connection_id):
        raise InvalidCommand(
            f"invalid connection id {connection_id[:64]!r}: expected {CONNECTION_ID_RULE}"
        )
    return connection_id


def validate_ws_url(ws_url: str) -> str:
    if len(ws_url) > MAX_URL_LENGTH:
        raise InvalidCommand(f"ws_url is longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(ws_url)
        port = parts.port  # parsed lazily: a bad port only raises here
    except ValueError as exc:  # "ws://[::1/x", "ws://h:99999"
        # The parser's message quotes the netloc, user info and password included: say what
        # is wrong in words of our own, and chain nothing a traceback could print.
        raise InvalidCommand(f"ws_url has a malformed host or port: {_why(exc)}") from None
    if parts.scheme not in WS_SCHEMES:
        raise InvalidCommand(
            f"ws_url must start with ws:// or wss://, got scheme {parts.scheme or '(none)'!r}"
        )
    if not parts.hostname:
        raise InvalidCommand("ws_url has no host")
    if port == 0:
        raise InvalidCommand("ws_url has port 0")
    return ws_url


# What urlsplit's ValueError is about, told by words of its message that quote nothing of the
# URL; a message matching none of them gets the general wording.
_MALFORMED_REASONS = (
    ("NFKC", "the host or user info has characters that Unicode normalization (NFKC) changes"),
    ("out of range", "the port is out of range 0-65535"),
    ("cast to integer", "the port is not a number"),
    ("IPv6", "a bracketed IPv6 address is malformed"),
    ("IPv4", "a bracketed IPv6 address is malformed"),
)


def _why(exc: ValueError) -> str:
    message = str(exc)
    return next((why for word, why in _MALFORMED_REASONS if word in message), "unparseable")


def validate_session_id(session_id: str) -> str:
    # Printable and non-empty: it is a key in every store (a DynamoDB index key cannot be empty).
    if not 1 <= len(session_id) <= 256 or not session_id.isprintable():
        raise InvalidCommand("a worker session id must be 1-256 printable characters")
    return session_id
