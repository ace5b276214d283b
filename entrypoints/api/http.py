"""The transport-neutral request and response of the event API: the Lambda handler and the
local API convert their own shapes to and from these, and share everything in between."""

import json
from collections.abc import Mapping
from typing import Any

import attrs

# Larger bodies are refused with 413 before parsing: a START is about 2 KiB at most (the URL
# is limited to 2048 characters), so 16 KiB leaves room without letting callers make us parse
# megabytes (API Gateway itself would pass up to 10 MB).
MAX_BODY_BYTES = 16 * 1024
RETRY_AFTER_S = 2  # what a 503 tells callers: the store is briefly unreachable


@attrs.frozen
class HttpRequest:
    method: str
    path: str
    body: bytes
    request_id: str


@attrs.frozen
class HttpResponse:
    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = attrs.field(factory=dict)

    def encoded_body(self) -> str:
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False)

    def all_headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", **self.headers}


class ApiError(Exception):
    """A request refused before it reached the application (route, method, body)."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def error_response(
    status: int, code: str, message: str, request_id: str, headers: Mapping[str, str] | None = None
) -> HttpResponse:
    return HttpResponse(
        status, {"error": code, "message": message, "request_id": request_id}, dict(headers or {})
    )
