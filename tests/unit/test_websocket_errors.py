"""How the WebSocket adapter classifies failures: retry (UpstreamUnavailable), give up for now
(UpstreamRejected) or a normal end of the stream (None)."""

import ssl

import pytest
from websockets.datastructures import Headers
from websockets.exceptions import (
    ConnectionClosed,
    ConnectionClosedError,
    ConnectionClosedOK,
    InvalidMessage,
    InvalidStatus,
    InvalidUpgrade,
)
from websockets.frames import Close
from websockets.http11 import Response

from adapters.websocket.errors import closed_error, open_error
from adapters.websocket.options import DEFAULT_REJECTED_CLOSE_CODES
from application.errors import UpstreamRejected, UpstreamUnavailable

URL = "wss://u:pw-secret@h/s?token=tok-secret"
NORMAL = frozenset({1000})


def status(code: int) -> InvalidStatus:
    return InvalidStatus(Response(code, "", Headers()))


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (status(401), UpstreamRejected),
        (status(403), UpstreamRejected),
        (status(404), UpstreamRejected),
        (status(302), UpstreamRejected),  # redirects are never followed (SSRF)
        (status(429), UpstreamUnavailable),
        (status(500), UpstreamUnavailable),
        (status(503), UpstreamUnavailable),
        (InvalidMessage("did not receive a valid HTTP response"), UpstreamUnavailable),
        (InvalidUpgrade("Upgrade", "h2c"), UpstreamRejected),
        (ssl.SSLCertVerificationError("certificate verify failed"), UpstreamRejected),
        (ConnectionRefusedError(111, "refused"), UpstreamUnavailable),
        (TimeoutError("timed out during opening handshake"), UpstreamUnavailable),
    ],
)
def test_open_failures(exc: Exception, kind: type[Exception]) -> None:
    error = open_error(exc, URL)

    assert type(error) is kind
    assert "secret" not in str(error)


def closed(rcvd: int | None, sent: int | None, rcvd_first: bool | None = None) -> ConnectionClosed:
    kind = ConnectionClosedOK if {rcvd, sent} <= {1000, 1001} else ConnectionClosedError
    return kind(
        None if rcvd is None else Close(rcvd, ""),
        None if sent is None else Close(sent, ""),
        rcvd_first,
    )


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (closed(1000, 1000, rcvd_first=True), None),  # the upstream ended the stream
        (closed(1001, 1001, rcvd_first=True), UpstreamUnavailable),  # restarting upstream
        (closed(None, None), UpstreamUnavailable),  # 1006: dropped
        (closed(1011, 1011, rcvd_first=True), UpstreamUnavailable),
        (closed(1012, 1012, rcvd_first=True), UpstreamUnavailable),
        (closed(None, 1011), UpstreamUnavailable),  # keepalive ping timeout
        (closed(None, 1009), UpstreamRejected),  # we refused an oversized message
        (closed(1009, 1009, rcvd_first=False), UpstreamRejected),
        (closed(1008, 1008, rcvd_first=True), UpstreamRejected),
        (closed(4410, 4410, rcvd_first=True), UpstreamRejected),
        (closed(4000, 4000, rcvd_first=True), UpstreamUnavailable),
        (closed(1000, None), None),
    ],
)
def test_close_codes(exc: ConnectionClosed, kind: type[Exception] | None) -> None:
    error = closed_error(exc, URL, NORMAL, DEFAULT_REJECTED_CLOSE_CODES)

    assert (None if error is None else type(error)) is kind
    assert error is None or "secret" not in str(error)


def test_a_client_initiated_1000_is_not_an_end_of_stream() -> None:
    error = closed_error(closed(1000, 1000, rcvd_first=False), URL, NORMAL, frozenset())

    assert isinstance(error, UpstreamUnavailable)


def test_a_close_reason_never_repeats_a_secret() -> None:
    """The upstream writes the close reason: it may echo the URL's token, a header's
    credential, or a credential of its own shape."""
    url = "wss://feed.example.com/s?k=urlsecret1&from_seq=7"
    reason = "denied k=urlsecret1 with Bearer hdr-secret-99, retry with api_key=other-777"
    exc = ConnectionClosedError(Close(4401, reason), None)

    error = closed_error(exc, url, NORMAL, DEFAULT_REJECTED_CLOSE_CODES, ["hdr-secret-99"])

    assert error is not None
    for secret in ("urlsecret1", "hdr-secret-99", "other-777"):
        assert secret not in str(error)
    assert "from_seq=7" in str(error)
