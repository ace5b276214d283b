"""Which parts of an upstream URL are secret: one rule for logs, errors and the ownership log.

Upstream URLs come from API callers and often carry credentials: `wss://user:pass@host/...`
or `?token=...`, `?api_key=...`, pre-signed `X-Amz-Signature=...`, or a name nobody can
guess (`?k=...`, `?meeting_pin=...`). So every query value is masked unless its name is on a
short allow-list of names known to carry no secret (`SHOWN_QUERY_NAMES`); `&` and `;` both
separate parameters (servers split on either). A secret inside a path segment
(`/stream/<token>`) cannot be recognised: put credentials in a header (the upstream hook).
"""

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

MASK = "***"
# Query parameter names whose values are shown (exact, case-insensitive): resume points and
# stream formats, which help debugging and are never credentials. Every other value is masked.
SHOWN_QUERY_NAMES = frozenset(
    {"from_seq", "seq", "offset", "format", "encoding", "sample_rate", "language", "lang", "v"}
)
# Shorter values are not treated as secrets: masking every "1" would garble messages
# ("HTTP 401") and a secret that short protects nothing.
MIN_SECRET_LENGTH = 4


def is_shown_query_name(name: str) -> bool:
    return unquote_plus(name).lower() in SHOWN_QUERY_NAMES


def redact_url(url: str) -> str:
    """`url` with its userinfo, fragment and every query value not on the allow-list
    replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "".join(  # each separator kept as sent
        _redact_pair(piece) if i % 2 == 0 else piece
        for i, piece in enumerate(re.split(r"([&;])", parts.query))
    )
    fragment = MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_pair(pair: str) -> str:
    name, sep, value = pair.partition("=")
    if not sep:  # a bare name (`?debug`) has no value to hide... unless it is one
        return pair if is_shown_query_name(name) or len(name) < MIN_SECRET_LENGTH else MASK
    return pair if is_shown_query_name(name) or not value else f"{name}{sep}{MASK}"
