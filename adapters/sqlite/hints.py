"""The hint body, the same JSON as the SQS queue's: `{"connection_id": "<id>"}`, with
`"delayed": true` added to a copy (the field's name predates copies sent without a delay;
hints in flight through a rolling deploy keep their meaning).

Kept here rather than imported from adapters/sqs so that the SQLite adapter does not depend on
another technology's package; the format is one line and the contract suite checks both.
"""

import json

from application.ports.queue import Delivery, HintOrigin, origin_fields, origin_of
from domain import DomainError, validate_connection_id

CONNECTION_ID_FIELD = "connection_id"
DELAYED_FIELD = "delayed"
_ECHO_LIMIT = 64  # a malformed body is quoted in the problem, never in full


def encode_hint(connection_id: str, copy: bool = False, origin: HintOrigin | None = None) -> str:
    document: dict[str, object] = {CONNECTION_ID_FIELD: connection_id}
    if copy:
        document[DELAYED_FIELD] = True
    document.update(origin_fields(origin))
    return json.dumps(document, separators=(",", ":"))


def delivery_of(body: str, receipt: str) -> Delivery:
    """The Delivery for a body; a malformed one gets connection_id=None and the problem."""
    try:
        document = json.loads(body)
    except ValueError:
        return _malformed(receipt, f"body is not JSON: {body[:_ECHO_LIMIT]!r}")
    connection_id = document.get(CONNECTION_ID_FIELD) if isinstance(document, dict) else None
    if not isinstance(connection_id, str):
        return _malformed(
            receipt,
            f"body is not an object with a string {CONNECTION_ID_FIELD!r}: {body[:_ECHO_LIMIT]!r}",
        )
    copy = document.get(DELAYED_FIELD) is True
    try:
        origin = origin_of(document)
        return Delivery(receipt, validate_connection_id(connection_id), copy=copy, origin=origin)
    except (DomainError, ValueError) as exc:
        return _malformed(receipt, str(exc))


def _malformed(receipt: str, problem: str) -> Delivery:
    return Delivery(receipt=receipt, connection_id=None, problem=problem)
