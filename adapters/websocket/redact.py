"""Keep credentials carried in upstream URLs out of logs and exception messages.

Which parts of a URL are secret is the domain's rule (`domain.redaction`: the ownership log
applies it too). Every URL this adapter logs or puts in an exception goes through
`redact_url`; any free text that may echo the URL (a library's error message) goes through
`redact_text`; an upstream's close reason, which the upstream writes and may echo a
credential, through `redact_reason`.
"""

import logging
import re
from collections.abc import Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from domain.redaction import MASK, MIN_SECRET_LENGTH, is_shown_query_name
from domain.redaction import redact_url as redact_url  # this adapter's URLs are masked by it

_QUERY_SEPARATOR = re.compile(r"[&;]")

# Header (and close-reason) names that carry credentials (substring match, case-insensitive).
_SENSITIVE_NAME = re.compile(
    r"token|key|secret|pass|pwd|auth|sig|credential|session|jwt|cookie", re.IGNORECASE
)
# In free text an upstream wrote: `token=...`, `api_key: ...`, `Bearer ...`, `Basic ...`.
_CREDENTIAL_IN_TEXT = re.compile(
    r"(?P<name>[\w.-]*(?:token|key|secret|pass|pwd|auth|sig|credential|session|jwt|cookie)"
    r"[\w.-]*)(?P<sep>\s*[=:]\s*)(?P<value>[^\s&;,)\]]+)"
    r"|(?P<scheme>\b(?:Bearer|Basic)\s+)(?P<credential>[^\s,;)\]]+)",
    re.IGNORECASE,
)


def is_sensitive_name(name: str) -> bool:
    return bool(_SENSITIVE_NAME.search(name))


def url_secrets(url: str) -> list[str]:
    """The secret values in `url`, raw and percent-decoded, longest first."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: set[str] = set()
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        found.update({userinfo, *userinfo.split(":", 1)})
    for pair in _QUERY_SEPARATOR.split(parts.query):
        name, sep, value = pair.partition("=")
        if not is_shown_query_name(name):
            found.add(value if sep else name)  # a bare `?<token>` is a value too
    if parts.fragment:
        found.add(parts.fragment)
    decoded = {unquote_plus(s) for s in found}
    return sorted(
        (s for s in found | decoded if len(s) >= MIN_SECRET_LENGTH), key=len, reverse=True
    )


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret replaced by `***`."""
    for secret in secrets:
        if len(secret) >= MIN_SECRET_LENGTH:
            text = text.replace(secret, MASK)
    return text


def redact_reason(text: str, secrets: Iterable[str]) -> str:
    """Free text from the upstream (a close reason): the known secrets, and anything shaped
    like a credential (`token=...`, `Bearer ...`), masked."""

    def mask(match: re.Match[str]) -> str:
        if match.group("scheme"):
            return f"{match.group('scheme')}{MASK}"
        return f"{match.group('name')}{match.group('sep')}{MASK}"

    return _CREDENTIAL_IN_TEXT.sub(mask, redact_text(text, secrets))


class RedactingLogger(logging.LoggerAdapter[logging.Logger]):
    """Handed to websockets as its logger: at debug level websockets logs the request line
    (with the query string) and every header (Authorization included)."""

    def __init__(self, logger: logging.Logger, secrets: Iterable[str]) -> None:
        super().__init__(logger, {})
        self._secrets = sorted(set(secrets), key=len, reverse=True)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        return redact_text(str(msg), self._secrets), kwargs

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        # websockets logs headers as ("> %s: %s", name, value): mask sensitive header values.
        if len(args) == 2 and isinstance(args[0], str) and _is_sensitive_header(args[0]):
            args = (args[0], MASK)
        args = tuple(redact_text(a, self._secrets) if isinstance(a, str) else a for a in args)
        msg, kwargs = self.process(msg, kwargs)
        self.logger.log(level, msg, *args, **kwargs)


def _is_sensitive_header(name: str) -> bool:
    return name.lower() in {"authorization", "proxy-authorization", "cookie"} or (
        is_sensitive_name(name)
    )
