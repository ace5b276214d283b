"""`python -m entrypoints.lambda_router METHOD PATH [BODY]`: invoke the Lambda handler
in-process with an API Gateway proxy event built from the arguments, with this shell's
WSFLEET_* settings, and print the response (for trying the router against a local moto
server; on AWS, call the API Gateway URL)."""

import json
import sys
import uuid
from typing import Any

from entrypoints.lambda_router.handler import close, handler


class _Context:
    aws_request_id = f"local-{uuid.uuid4()}"


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    method, path, *body = argv
    event: dict[str, Any] = {
        "httpMethod": method.upper(),
        "path": path,
        "headers": {"Content-Type": "application/json"},
        "requestContext": {"requestId": str(uuid.uuid4())},
        "body": body[0] if body else None,
        "isBase64Encoded": False,
    }
    try:
        response = handler(event, _Context())
    finally:
        close()
    print(response["statusCode"], file=sys.stderr)
    print(json.dumps(json.loads(response["body"]), indent=2))
    return 0 if response["statusCode"] < 400 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
