"""What the local event API checks before a request reaches the EventApi, and the Lambda
router does not: API Gateway authenticates its callers (IAM), while `wsfleet api` listens on
a port any local process — and any web page open in a local browser — can reach.

- `Host` must name the server: its bound address, `localhost`, `127.0.0.1`, `[::1]` or a
  configured name (WSFLEET_API_ALLOWED_HOSTS). A page on attacker.example whose name is
  re-pointed at 127.0.0.1 (DNS rebinding) sends `Host: attacker.example`: refused 421.
- With WSFLEET_API_TOKEN set, every request needs `Authorization: Bearer <token>` (401).
- Commands (POST, PUT) must say `Content-Type: application/json` (415): a browser sends a
  cross-site POST without asking first only with a form type or text/plain, never with JSON.
  A bodyless POST (`/connections/{id}/stop`) needs it too, or any page could STOP streams.
- Bound to anything but a loopback address, the API is reachable from the network, where a
  client can send `Host: localhost`: it refuses to start without a token.
"""

import hmac
from collections.abc import Iterable, Mapping

import attrs

from application.errors import ConfigurationError
from entrypoints.api.http import ApiError
from entrypoints.web import host_name, is_loopback_bind

_COMMAND_METHODS = frozenset({"POST", "PUT"})
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@attrs.frozen
class ApiPerimeter:
    allowed_hosts: frozenset[str]
    token: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def of(
        cls, bound_host: str, extra_hosts: Iterable[str] = (), token: str | None = None
    ) -> "ApiPerimeter":
        names = {host_name(h) for h in (bound_host, *_LOOPBACK_NAMES, *extra_hosts)}
        return cls(frozenset(names), token)

    def check(self, method: str, headers: Mapping[str, str]) -> None:
        """Raises ApiError (400 no Host, 421 unknown Host, 401 no or wrong token, 415 a
        command that is not JSON). `headers`: lower-case names."""
        host = headers.get("host")
        if host is None:
            raise ApiError(400, "invalid_request", "the Host header is required")
        if host_name(host) not in self.allowed_hosts:
            raise ApiError(
                421,
                "misdirected_request",
                "this API does not answer for the host in the Host header; "
                "add it to WSFLEET_API_ALLOWED_HOSTS if it is yours",
            )
        if self.token is not None and not self._authorized(headers.get("authorization", "")):
            raise ApiError(
                401,
                "unauthorized",
                "send Authorization: Bearer <the WSFLEET_API_TOKEN of this API>",
                {"WWW-Authenticate": 'Bearer realm="wsfleet"'},
            )
        if method.upper() in _COMMAND_METHODS:
            media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
            if media_type != "application/json":
                raise ApiError(
                    415,
                    "unsupported_media_type",
                    "commands must be sent with Content-Type: application/json",
                )

    def _authorized(self, authorization: str) -> bool:
        assert self.token is not None
        scheme, _, credential = authorization.strip().partition(" ")
        # compare_digest on bytes: constant time whatever the characters (str needs ASCII).
        matches = hmac.compare_digest(
            credential.strip().encode("utf-8", "surrogateescape"), self.token.encode("utf-8")
        )
        return scheme.lower() == "bearer" and matches


def require_token_off_loopback(bound_host: str, token: str | None) -> None:
    """Raises ConfigurationError if `bound_host` is reachable from other machines (not a
    loopback address) while no token is set."""
    if token is None and not is_loopback_bind(bound_host):
        raise ConfigurationError(
            f"--host / WSFLEET_API_HOST={bound_host} is reachable from other machines, and the "
            "API has no token: anyone there could START and STOP connections over plain HTTP. "
            "Set WSFLEET_API_TOKEN (16+ characters) to require `Authorization: Bearer <token>`, "
            "or bind a loopback address (127.0.0.1, the default)"
        )
