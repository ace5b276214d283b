"""The routing table: path templates with one `{id}` parameter, and the methods each allows.

Routing is done here rather than by API Gateway resources so that the Lambda (behind a
`{proxy+}` resource) and the local API answer 404 and 405 identically."""

from collections.abc import Sequence
from urllib.parse import unquote

import attrs

from entrypoints.api.http import ApiError

EVENTS = "/events"
CONNECTION = "/connections/{id}"
STOP = "/connections/{id}/stop"
HISTORY = "/connections/{id}/history"

ROUTES: dict[str, tuple[str, ...]] = {
    EVENTS: ("POST",),
    CONNECTION: ("GET", "PUT"),
    STOP: ("POST",),
    HISTORY: ("GET",),
}


@attrs.frozen
class Match:
    template: str
    connection_id: str | None


def match(method: str, path: str) -> Match:
    """The route for `method path`. Raises ApiError 404 (no such path) or 405 (with Allow)."""
    segments = path.split("/")
    for template, methods in ROUTES.items():
        captured = _capture(template.split("/"), segments)
        if captured is None:
            continue
        if method.upper() not in methods:
            raise ApiError(
                405,
                "method_not_allowed",
                f"{method[:16]} is not allowed on {template}; allowed: {', '.join(methods)}",
                {"Allow": ", ".join(methods)},
            )
        return Match(template, captured or None)
    raise ApiError(404, "not_found", f"no route for {path[:128]!r}")


def _capture(template: Sequence[str], segments: Sequence[str]) -> str | None:
    """The `{id}` segment (percent-decoded), "" for a route without one, None if no match."""
    if len(template) != len(segments):
        return None
    captured = ""
    for want, got in zip(template, segments, strict=True):
        if want == "{id}":
            captured = unquote(got)
            if not captured:
                return None
        elif want != got:
            return None
    return captured
