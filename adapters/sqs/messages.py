"""The hint body: one function writes it, one reads it back into a connection id."""

import json

from adapters.sqs.schema import (
    ARTICLE_KEY_FIELD,
    ARTICLE_KEY_PREFIX,
    CONNECTION_ID_FIELD,
    DELAYED_FIELD,
)
from application.ports.queue import HintOrigin, origin_fields, origin_of
from domain import DomainError, validate_connection_id

_ECHO_LIMIT = 64  # a malformed body is echoed into the problem, but never in full


class MalformedHint(ValueError):
    """A body that names no valid connection; the message says why."""


def encode_hint(connection_id: str, copy: bool = False, origin: HintOrigin | None = None) -> str:
    document: dict[str, object] = {CONNECTION_ID_FIELD: connection_id}
    if copy:
        document[DELAYED_FIELD] = True
    document.update(origin_fields(origin))
    return json.dumps(document, separators=(",", ":"))


def decode_hint(body: str) -> str:
    """The connection id a hint names. Raises MalformedHint."""
    return decode(body)[0]


def decode(body: str) -> tuple[str, bool]:
    """The connection id a hint names, and whether it was sent as a copy. Raises
    MalformedHint."""
    connection_id, copy, _ = decode_all(body)
    return connection_id, copy


def decode_all(body: str) -> tuple[str, bool, HintOrigin | None]:
    """The connection id, whether it is a copy, and the hint's origin. Raises
    MalformedHint."""
    try:
        document = json.loads(body)
    except ValueError:
        raise MalformedHint(f"body is not JSON: {body[:_ECHO_LIMIT]!r}") from None
    if not isinstance(document, dict):
        raise MalformedHint(f"body is not a JSON object: {body[:_ECHO_LIMIT]!r}")
    connection_id = document.get(CONNECTION_ID_FIELD)
    if connection_id is None:
        key = document.get(ARTICLE_KEY_FIELD)
        if isinstance(key, str) and key.startswith(ARTICLE_KEY_PREFIX):
            connection_id = key.removeprefix(ARTICLE_KEY_PREFIX)
    if not isinstance(connection_id, str):
        raise MalformedHint(
            f"body names no connection (expected a string {CONNECTION_ID_FIELD!r} "
            f"or {ARTICLE_KEY_FIELD!r} = '{ARTICLE_KEY_PREFIX}<id>'): {body[:_ECHO_LIMIT]!r}"
        )
    try:
        origin = origin_of(document)
        return validate_connection_id(connection_id), document.get(DELAYED_FIELD) is True, origin
    except (DomainError, ValueError) as exc:
        raise MalformedHint(str(exc)) from None
