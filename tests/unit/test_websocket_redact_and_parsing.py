"""Pure helpers of the WebSocket adapter: URL redaction, the resume URL, the message format."""

import logging

import pytest

from adapters.websocket import parse_json_message, redact_url, with_resume
from adapters.websocket.redact import RedactingLogger, redact_reason, redact_text, url_secrets
from application.ports import UpstreamMessage


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("wss://h/s?from_seq=12&format=pcm", "wss://h/s?from_seq=12&format=pcm"),
        ("wss://user:pw@h:443/s", "wss://***@h:443/s"),
        ("wss://tok@h/s", "wss://***@h/s"),
        ("wss://h/s?token=abc&from_seq=1", "wss://h/s?token=***&from_seq=1"),
        # Names nobody could list as secret are masked too: only the allow-list is shown.
        ("wss://h/s?k=s3cr3t&meeting_pin=991&room=1", "wss://h/s?k=***&meeting_pin=***&room=***"),
        # `;` separates parameters as `&` does: the value after it is masked, separators kept.
        ("wss://h/s?from_seq=1;token=abc&v=2", "wss://h/s?from_seq=1;token=***&v=2"),
        ("wss://h/s?FROM_SEQ=1;x=abcd", "wss://h/s?FROM_SEQ=1;x=***"),
        ("wss://h/s?abcdefgh1234", "wss://h/s?***"),  # a bare value is a value
        (
            "wss://h/s?api_key=a&X-Amz-Signature=b&X-Amz-Security-Token=c&password=d&auth=e",
            "wss://h/s?api_key=***&X-Amz-Signature=***&X-Amz-Security-Token=***&password=***&auth=***",
        ),
        ("wss://h/s?Secret=x#frag", "wss://h/s?Secret=***#***"),
        ("ws://[::1/s?token=abc", "<invalid URL>"),
    ],
)
def test_redact_url_masks_userinfo_and_credential_params(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


def test_url_secrets_include_every_value_off_the_allow_list_after_either_separator() -> None:
    secrets = url_secrets("wss://h/s?from_seq=12345&room=4567;k=s3cr3t&sig=a%2Bb%3Dcc")

    assert set(secrets) == {"4567", "s3cr3t", "a%2Bb%3Dcc", "a+b=cc"}


@pytest.mark.parametrize(
    ("reason", "redacted"),
    [
        ("bad token abcd1234 for room", "bad token *** for room"),  # a known secret
        ("auth failed: api_key=zz9988 expired", "auth failed: api_key=*** expired"),
        ("invalid session_token: q1w2e3r4", "invalid session_token: ***"),
        ("expected Bearer eyJhbGciOi.x.y", "expected Bearer ***"),
        ("stream ended", "stream ended"),
    ],
)
def test_redact_reason_masks_known_secrets_and_credential_shapes(
    reason: str, redacted: str
) -> None:
    assert redact_reason(reason, ["abcd1234"]) == redacted


def test_redact_text_masks_raw_and_decoded_secrets() -> None:
    url = "wss://bob:p%40ssword@h/s?token=a%2Bb%3Dc&room=12"
    text = "failed for bob:p@ssword token a+b=c and a%2Bb%3Dc in room 12"

    assert redact_text(text, url_secrets(url)) == "failed for *** token *** and *** in room 12"


def test_redacting_logger_masks_secret_args_and_auth_headers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = RedactingLogger(logging.getLogger("test.redact"), ["topsecret"])
    with caplog.at_level(logging.DEBUG, logger="test.redact"):
        logger.debug("> GET %s HTTP/1.1", "/s?token=topsecret")
        logger.debug("> %s: %s", "Authorization", "Basic Ym9iOnB3")

    assert caplog.messages == ["> GET /s?token=*** HTTP/1.1", "> Authorization: ***"]


def test_with_resume_sets_the_param_and_keeps_the_rest_of_the_query_verbatim() -> None:
    url = "wss://h/s?b=%2B1&from_seq=9&a=x+y&X-Amz-Signature=ab%2F"

    assert (
        with_resume(url, "from_seq", 42)
        == "wss://h/s?b=%2B1&a=x+y&X-Amz-Signature=ab%2F&from_seq=42"
    )
    assert with_resume("ws://h/s", "cursor", 0) == "ws://h/s?cursor=0"


@pytest.mark.parametrize(
    "raw",
    [
        '{"seq": 7, "data": "hello", "speaker": "ana", "at": 12.5}',
        '{"seq": 7, "text": "hi"}',
        '{"seq": 7, "data": {"x": [1, 2]}}',
    ],
)
def test_by_default_the_whole_frame_is_stored_with_its_seq(raw: str) -> None:
    """Nothing dropped: a transcript's speaker and timestamps reach the sink."""
    assert parse_json_message(raw) == UpstreamMessage(7, raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"seq": 7, "data": "hello", "speaker": "ana"}', UpstreamMessage(7, "hello")),
        ('{"seq": 7, "data": {"x": [1, 2]}}', UpstreamMessage(7, '{"x":[1,2]}')),
        ('{"seq": 7, "text": "hi"}', UpstreamMessage(7, '{"seq": 7, "text": "hi"}')),
        ('{"seq": null, "data": "hi"}', UpstreamMessage(None, "hi")),
        ('{"data": "hi"}', UpstreamMessage(None, "hi")),
        ("plain text", UpstreamMessage(None, "plain text")),
        ("[1, 2]", UpstreamMessage(None, "[1, 2]")),
    ],
)
def test_a_named_data_field_alone_is_kept_and_anything_else_passes_whole(
    raw: str, message: UpstreamMessage
) -> None:
    assert parse_json_message(raw, data_field="data") == message


@pytest.mark.parametrize("seq", ['"7"', "-1", "1.5", "true"])
def test_a_seq_that_is_not_a_non_negative_integer_is_an_error(seq: str) -> None:
    with pytest.raises(ValueError, match="seq"):
        parse_json_message(f'{{"seq": {seq}}}')


def test_custom_field_names() -> None:
    assert parse_json_message('{"n": 3, "body": "x"}', "n", "body") == UpstreamMessage(3, "x")


@pytest.mark.parametrize(
    "raw",
    ["[" * 5_000, '{"seq": 1, "data": ' + "[" * 5_000 + "]" * 5_000 + "}"],
    ids=["unclosed-brackets", "deep-data"],
)
def test_json_nested_beyond_the_parsers_depth_is_an_error_not_a_recursion_error(raw: str) -> None:
    """json raises RecursionError, which is no ValueError: it ended the session as a bug,
    released with no failure counted, and the poison circulated through the fleet."""
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_message(raw)
