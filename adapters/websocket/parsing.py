"""The built-in message format and the resume URL.

Messages: a JSON object with an integer seq field is a sequenced message, stored whole: every
field the upstream sent (a speaker, a timestamp) reaches the sink. Keeping one field only is a
choice the caller makes by naming it (`data_field`): that field is then the payload (a string
as is, anything else re-encoded as JSON), or the whole text when the object has no such field.
Text that is not a JSON object, or has no seq (or a null one), is passed on whole with
seq=None: the worker then numbers messages itself and cannot resume exactly.
"""

import json
from urllib.parse import quote, unquote_plus, urlsplit, urlunsplit

from application.ports import UpstreamMessage


def parse_json_message(
    raw: str, seq_field: str = "seq", data_field: str | None = None
) -> UpstreamMessage:
    """Raises ValueError when the seq field holds something other than a non-negative int, or
    the JSON nests deeper than the parser's recursion limit (its RecursionError is not a
    ValueError, and would otherwise end the session as a bug instead of an upstream fault)."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    except ValueError:
        return UpstreamMessage(seq=None, data=raw)
    if not isinstance(body, dict):
        return UpstreamMessage(seq=None, data=raw)
    seq = body.get(seq_field)
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
        raise ValueError(f"field {seq_field!r} is not a non-negative integer: {seq!r:.40}")
    if data_field is None or data_field not in body:
        return UpstreamMessage(seq=seq, data=raw)
    data = body[data_field]
    if isinstance(data, str):
        return UpstreamMessage(seq=seq, data=data)
    try:
        return UpstreamMessage(seq=seq, data=json.dumps(data, separators=(",", ":")))
    except RecursionError:
        raise ValueError(f"seq {seq}: data nested too deeply to re-encode") from None


def with_resume(url: str, param: str, from_seq: int) -> str:
    """`url` asking for messages from `from_seq`: `param` is set (replaced if present) and the
    rest of the query is kept byte for byte (pre-signed URLs sign the exact query string)."""
    parts = urlsplit(url)
    kept = [p for p in parts.query.split("&") if p and unquote_plus(p.partition("=")[0]) != param]
    kept.append(f"{quote(param, safe='')}={from_seq}")
    return urlunsplit(parts._replace(query="&".join(kept)))
