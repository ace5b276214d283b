"""Request bodies: size, JSON, then field by field, each refusal a precise 400 message.

Only the shape is checked here (fields, types); what the values mean (connection id
alphabet, ws:// or wss://, allowed hosts) is the application's and the domain's to judge.
"""

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from entrypoints.api.http import MAX_BODY_BYTES, ApiError

EVENT_TYPES = ("START", "STOP")


@attrs.frozen
class EventCommand:
    event_type: str  # START or STOP
    connection_id: str
    ws_url: str | None


def parse_event(body: bytes) -> EventCommand:
    """`{"event_type": "START"|"STOP", "connection_id": ..., "ws_url": ...}` (the event type
    in any case, as the original router took it; STOP may carry a ws_url,
    which it ignores)."""
    doc = _object(body, allowed=("event_type", "connection_id", "ws_url"))
    _require(doc, "event_type", "connection_id")
    event_type = _string(doc, "event_type").upper()
    if event_type not in EVENT_TYPES:
        raise _bad(
            "unknown_event_type",
            f"event_type must be START or STOP, got {_string(doc, 'event_type')[:32]!r}",
        )
    if event_type == "START":
        _require(doc, "ws_url")
    ws_url = _url(doc) if "ws_url" in doc else None
    return EventCommand(event_type, _string(doc, "connection_id"), ws_url)


def parse_start(body: bytes) -> str:
    """`{"ws_url": ...}` for PUT /connections/{id}; returns the URL."""
    doc = _object(body, allowed=("ws_url",))
    _require(doc, "ws_url")
    return _url(doc)


def check_size(body: bytes) -> None:
    if len(body) > MAX_BODY_BYTES:
        raise ApiError(
            413,
            "payload_too_large",
            f"body is {len(body)} bytes; the limit is {MAX_BODY_BYTES} bytes",
        )


def _object(body: bytes, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    check_size(body)
    if not body.strip():
        raise _bad("malformed_json", "body is empty; expected a JSON object")
    try:
        doc = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise _bad("malformed_json", "body is not UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError, or an integer too long to convert
        raise _bad("malformed_json", f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise _bad("malformed_json", "body is nested too deeply") from None
    if not isinstance(doc, dict):
        raise _bad("invalid_request", f"body must be a JSON object, got {_type(doc)}")
    unknown = sorted(k for k in doc if k not in allowed)
    if unknown:
        names = ", ".join(repr(k[:64]) for k in unknown[:5])
        raise _bad(
            "invalid_request",
            f"unknown field(s) {names}; allowed fields: {', '.join(allowed)}",
        )
    return doc


def _require(doc: Mapping[str, Any], *names: str) -> None:
    missing = [n for n in names if n not in doc]
    if missing:
        raise _bad("invalid_request", f"missing field(s): {', '.join(missing)}")


def _string(doc: Mapping[str, Any], name: str) -> str:
    value = doc[name]
    if not isinstance(value, str):
        raise _bad("invalid_request", f"field {name!r} must be a string, got {_type(value)}")
    return value


def _url(doc: Mapping[str, Any]) -> str:
    value = _string(doc, "ws_url")
    try:
        urlsplit(value).port  # noqa: B018  (raises ValueError: bad brackets, port, characters)
    except ValueError:
        # The library's message may quote the URL's credentials: say what is wrong, not it.
        raise _bad("invalid_request", "ws_url is not a valid URL: malformed host or port") from None
    return value


def _type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _bad(code: str, message: str) -> ApiError:
    return ApiError(400, code, message)
