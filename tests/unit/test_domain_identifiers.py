"""What may enter the domain from outside: connection ids, worker session ids and upstream
URLs."""

import pytest

from domain import InvalidCommand, validate_connection_id, validate_session_id, validate_ws_url
from domain.identifiers import MAX_URL_LENGTH


@pytest.mark.parametrize(
    "connection_id",
    [
        "c",
        "meeting-123",
        "tenant:feed_7.v2",
        "0b9e6a8e-2f6c-4b8e-9a53-0f7b6d1c2e3a",
        "A" * 128,
    ],
)
def test_connection_ids_from_the_safe_alphabet_are_accepted(connection_id: str) -> None:
    assert validate_connection_id(connection_id) == connection_id


@pytest.mark.parametrize(
    "connection_id",
    [
        "",
        "A" * 129,
        "-leading-dash",
        ".hidden",
        "has space",
        "slash/in/it",
        "conn-1\n",  # a trailing newline must not slip past an anchored pattern
        "conn-1\nforged log line",
        "ünïcode",
        "semi;colon",
    ],
)
def test_connection_ids_outside_the_safe_alphabet_are_refused_with_the_rule(
    connection_id: str,
) -> None:
    with pytest.raises(InvalidCommand, match=r"invalid connection id .*expected 1-128 characters"):
        validate_connection_id(connection_id)


def test_refused_connection_id_is_quoted_and_shortened_in_the_message() -> None:
    with pytest.raises(InvalidCommand) as refused:
        validate_connection_id("x" * 1000 + "!")

    assert "x" * 65 not in str(refused.value)


@pytest.mark.parametrize(
    "ws_url",
    [
        "ws://feeds.example.com",
        "wss://feeds.example.com:8443/stream?token=abc",
        "wss://[2606:4700::1111]/v1",
        "WSS://Feeds.Example.com/upper",
    ],
)
def test_ws_and_wss_urls_with_a_host_are_accepted(ws_url: str) -> None:
    assert validate_ws_url(ws_url) == ws_url


@pytest.mark.parametrize(
    ("ws_url", "reason"),
    [
        ("http://feeds.example.com", "must start with ws:// or wss://, got scheme 'http'"),
        ("https://feeds.example.com", "got scheme 'https'"),
        ("file:///etc/passwd", "got scheme 'file'"),
        ("feeds.example.com/stream", r"got scheme '\(none\)'"),
        ("wss:///no-host", "has no host"),
        ("wss://" + "a" * MAX_URL_LENGTH, f"longer than {MAX_URL_LENGTH}"),
    ],
)
def test_other_urls_are_refused_saying_why(ws_url: str, reason: str) -> None:
    with pytest.raises(InvalidCommand, match=reason):
        validate_ws_url(ws_url)


@pytest.mark.parametrize(
    "url", ["ws://[::1/x", "ws://host:99999/x", "ws://host:abc/x", "ws://h:0/"]
)
def test_malformed_host_or_port_is_an_invalid_command_not_a_crash(url: str) -> None:
    with pytest.raises(InvalidCommand, match="ws_url has"):
        validate_ws_url(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ws://us\u2100er:TopSecretPw@example.com/", "Unicode normalization"),
        ("wss://admin:TopSecretPw@[::1/x?token=TopSecretPw", "IPv6 address is malformed"),
        ("ws://admin:TopSecretPw@[zz]/", "IPv6 address is malformed"),
        ("ws://admin:TopSecretPw@host:99999/", "out of range 0-65535"),
        ("ws://admin@host:TopSecretPw/", "port is not a number"),
    ],
)
def test_a_malformed_url_is_refused_without_quoting_its_credentials(url: str, reason: str) -> None:
    """urlsplit's own message quotes the netloc, password included; the CLI prints ours."""
    with pytest.raises(InvalidCommand, match=reason) as refused:
        validate_ws_url(url)

    assert "TopSecretPw" not in str(refused.value)
    assert "admin" not in str(refused.value)
    assert refused.value.__cause__ is None
    assert refused.value.__suppress_context__  # a traceback does not print the parser's error


@pytest.mark.parametrize(
    "session_id",
    ["s", "worker-7/0b9e6a8e-2f6c-4b8e-9a53-0f7b6d1c2e3a", "ip-10-0-1-7 #3", "ü" * 256],
)
def test_printable_session_ids_of_1_to_256_characters_are_accepted(session_id: str) -> None:
    assert validate_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "session_id", ["", "s" * 257, "s1\n", "s1\nforged log line", "\x00", "s\t1"]
)
def test_empty_long_or_unprintable_session_ids_are_refused(session_id: str) -> None:
    """A session id is a key in every store and goes into log lines."""
    with pytest.raises(
        InvalidCommand, match=r"^a worker session id must be 1-256 printable characters$"
    ):
        validate_session_id(session_id)
