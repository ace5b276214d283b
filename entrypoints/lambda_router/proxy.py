"""API Gateway REST proxy events to the event API's requests, and its responses back.

A proxy event has `httpMethod`, `path`, `headers`, `body` (a string, or None) and
`isBase64Encoded`; the response needs `statusCode`, `headers` and `body` (a string)."""

import base64
import binascii
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from entrypoints.api.http import MAX_BODY_BYTES, ApiError, HttpRequest, HttpResponse


def to_request(event: Mapping[str, Any], request_id: str) -> HttpRequest:
    """Raises ApiError 400 (not a proxy event, bad base64) or 413 (body too large)."""
    method = event.get("httpMethod")
    path = event.get("path")
    if not isinstance(method, str) or not isinstance(path, str):
        raise ApiError(400, "invalid_request", "not an API Gateway REST proxy event")
    return HttpRequest(method.upper(), _api_path(event, path), _body(event), request_id)


def request_id_of(event: Mapping[str, Any], fallback: str) -> str:
    """API Gateway's request id (the one callers see in `x-amzn-RequestId`), else Lambda's."""
    context = event.get("requestContext")
    if isinstance(context, Mapping):
        request_id = context.get("requestId")
        if isinstance(request_id, str) and request_id:
            return request_id[:128]
    return fallback


def to_proxy_response(response: HttpResponse, request_id: str) -> dict[str, Any]:
    return {
        "statusCode": response.status,
        "headers": {**response.all_headers(), "X-Request-Id": request_id},
        "body": response.encoded_body(),
        "isBase64Encoded": False,
    }


def _api_path(event: Mapping[str, Any], path: str) -> str:
    """The path within the API. Behind a `{proxy+}` resource it is rebuilt from the resource
    and the proxy parameter, because `path` also carries a custom domain's base path
    (`/v1/events`) when the API is mapped below one."""
    resource = event.get("resource")
    parameters = event.get("pathParameters")
    if isinstance(resource, str) and "{proxy+}" in resource and isinstance(parameters, Mapping):
        proxy = parameters.get("proxy")
        if isinstance(proxy, str):
            return resource.replace("{proxy+}", quote(proxy, safe="/"))
    return path


def _body(event: Mapping[str, Any]) -> bytes:
    body = event.get("body") or ""
    if not isinstance(body, str):
        raise ApiError(400, "invalid_request", "the proxy event's body is not a string")
    if event.get("isBase64Encoded"):
        # Refuse before decoding: base64 is 4 characters per 3 bytes.
        if len(body) > (MAX_BODY_BYTES + 2) // 3 * 4:
            raise _too_large(len(body) * 3 // 4)
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "malformed_json", "body is not valid base64") from None
    if len(body) > MAX_BODY_BYTES:  # characters <= UTF-8 bytes: surely too large
        raise _too_large(len(body))
    # surrogatepass: a lone surrogate from the JSON event is later refused as "not UTF-8".
    return body.encode("utf-8", "surrogatepass")


def _too_large(size: int) -> ApiError:
    return ApiError(
        413, "payload_too_large", f"body is {size} bytes or more; the limit is {MAX_BODY_BYTES}"
    )
