"""Translate websockets' and the network's failures into the upstream port's errors.

Opening:  bad URL, TLS verification failure, 3xx (redirects are not followed) and most 4xx
          -> UpstreamRejected; refused/reset/DNS failure, open timeout, 408/425/429, 5xx,
          a broken handshake -> UpstreamUnavailable.
Reading:  a close by the upstream with a normal code (1000 by default) is the end of the stream;
          a rejected code (1003/1007/1008/1009/1010, 4400-4499 by default, including this
          client refusing an oversized message with 1009) -> UpstreamRejected; anything else
          (1001 going away, 1006 dropped, 1011, 1012, keepalive timeout) -> UpstreamUnavailable.
Exception messages carry the redacted URL only; a close reason (the upstream's own text) is
redacted too: the URL's and the headers' secrets, and anything shaped like a credential.
"""

import ssl
from collections.abc import Sequence

from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidStatus,
    InvalidURI,
)
from websockets.frames import CloseCode

from adapters.websocket.redact import redact_reason, redact_text, redact_url, url_secrets
from application.errors import UpstreamError, UpstreamRejected, UpstreamUnavailable

# What `open` translates; anything else (a programming error) propagates unchanged.
OPEN_ERRORS = (InvalidURI, InvalidHandshake, OSError)
_RETRYABLE_STATUS = frozenset({408, 425, 429})


def open_error(exc: Exception, url: str) -> UpstreamError:
    where = f"upstream {redact_url(url)}"
    detail = redact_text(str(exc) or type(exc).__name__, url_secrets(url))
    if isinstance(exc, InvalidURI):
        return UpstreamRejected(f"{where}: invalid URL: {redact_text(exc.msg, url_secrets(url))}")
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        if status >= 500 or status in _RETRYABLE_STATUS:
            return UpstreamUnavailable(f"{where} answered HTTP {status} to the handshake")
        return UpstreamRejected(f"{where} refused the handshake with HTTP {status}")
    if isinstance(exc, InvalidMessage):
        return UpstreamUnavailable(f"{where}: broken handshake: {detail}")
    if isinstance(exc, InvalidHandshake):
        return UpstreamRejected(f"{where}: invalid handshake: {detail}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return UpstreamRejected(f"{where}: TLS certificate verification failed: {detail}")
    if isinstance(exc, TimeoutError):
        return UpstreamUnavailable(f"{where}: timed out opening the connection")
    return UpstreamUnavailable(f"{where}: cannot connect: {detail}")


def close_code(exc: ConnectionClosed) -> tuple[int, str, bool]:
    """(code, reason, whether the upstream initiated the close)."""
    if exc.rcvd is not None and (exc.sent is None or exc.rcvd_then_sent):
        return exc.rcvd.code, exc.rcvd.reason, True
    if exc.sent is not None:
        return exc.sent.code, exc.sent.reason, False
    return CloseCode.ABNORMAL_CLOSURE, "connection lost", True


def closed_error(
    exc: ConnectionClosed,
    url: str,
    normal_codes: frozenset[int],
    rejected_codes: frozenset[int],
    secrets: Sequence[str] = (),
) -> UpstreamError | None:
    """None when the upstream ended the stream normally, else the error to raise. `secrets`:
    what else the reason must not repeat (header values; the URL's are added here)."""
    code, reason, by_upstream = close_code(exc)
    if by_upstream and code in normal_codes:
        return None
    who = "upstream" if by_upstream else "client"
    known = sorted({*url_secrets(url), *secrets}, key=len, reverse=True)
    # Redacted before it is cut: a cut could leave half a secret no pattern recognises.
    text = f"{who} closed with code {code} ({redact_reason(reason, known)[:120]})"
    if code in rejected_codes:
        return UpstreamRejected(f"upstream {redact_url(url)}: {text}")
    return UpstreamUnavailable(f"upstream {redact_url(url)}: {text}")
