"""API Gateway REST proxy events, shaped as API Gateway sends them to a Lambda behind a
`{proxy+}` resource, and a Lambda context object."""

import base64
import itertools
import json
from typing import Any
from urllib.parse import unquote

import attrs

_ids = itertools.count(1)


@attrs.frozen
class LambdaContext:
    aws_request_id: str = "lambda-req-1"
    function_name: str = "wsfleet-router"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:wsfleet-router"


def proxy_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw_body: str | None = None,
    base64_body: bool = False,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`body` is JSON-encoded unless `raw_body` gives the exact string."""
    text = raw_body if raw_body is not None else (None if body is None else json.dumps(body))
    if text is not None and base64_body:
        text = base64.b64encode(text.encode()).decode()
    request_id = f"apigw-{next(_ids)}"
    all_headers = {"Content-Type": "application/json", "Host": "abc123.execute-api.aws"}
    all_headers.update(headers or {})
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": unquote(path.lstrip("/"))},  # decoded, as API Gateway does
        "stageVariables": None,
        "requestContext": {
            "resourceId": "abc",
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "extendedRequestId": f"ext-{request_id}",
            "requestTime": "30/Nov/2026:09:00:00 +0000",
            "path": f"/prod{path}",
            "accountId": "123456789012",
            "protocol": "HTTP/1.1",
            "stage": "prod",
            "domainPrefix": "abc123",
            "requestTimeEpoch": 1_796_000_000_000,
            "requestId": request_id,
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "test"},
            "domainName": "abc123.execute-api.aws",
            "apiId": "abc123",
        },
        "body": text,
        "isBase64Encoded": base64_body,
    }
