"""Which upstream URLs workers may open (SSRF protection).

Workers open URLs that API callers send, from inside the VPC. By default a URL is refused when
its host resolves to a loopback, link-local (169.254.0.0/16: the instance metadata service),
private, reserved, unspecified or multicast address. An allow-list of host names or suffixes
admits known hosts; `allow_private=True` lifts the address check for local use and tests.
The router checks at START and the worker checks again before every connect, because DNS can
change between the two.
"""

import ipaddress
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import urlsplit

import attrs

from application.errors import ApplicationError, UpstreamRejected
from domain import validate_ws_url


class ForbiddenUrl(UpstreamRejected):
    """The URL's host is not one workers may connect to."""


class HostResolver(Protocol):
    async def resolve(self, host: str) -> Sequence[str]:
        """IP addresses of `host`; raises ApplicationError if it does not resolve."""
        ...


@attrs.frozen
class UrlPolicy:
    resolver: HostResolver
    allowed_hosts: tuple[str, ...] = ()  # "feeds.example.com" or ".example.com" (suffix)
    allow_private: bool = False

    async def check(self, ws_url: str) -> None:
        """Raises InvalidCommand (not ws/wss) or ForbiddenUrl."""
        validate_ws_url(ws_url)
        host = (urlsplit(ws_url).hostname or "").lower().rstrip(".")
        if self.allowed_hosts and not any(_matches(host, a) for a in self.allowed_hosts):
            raise ForbiddenUrl(f"host {host!r} is not in the allowed upstream hosts")
        if self.allow_private:
            return
        try:
            addresses = await self.resolver.resolve(host)
        except ApplicationError as exc:
            raise ForbiddenUrl(f"host {host!r} does not resolve: {exc}") from exc
        if not addresses:  # nothing to check is not the same as nothing wrong
            raise ForbiddenUrl(f"host {host!r} resolves to no address")
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            if _is_internal(ip):
                raise ForbiddenUrl(
                    f"host {host!r} resolves to internal address {ip}; "
                    "set the allow-private setting only for local development"
                )


def _matches(host: str, allowed: str) -> bool:
    allowed = allowed.lower().rstrip(".")
    if allowed.startswith("."):
        return host.endswith(allowed) or host == allowed[1:]
    return host == allowed


def _is_internal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4 inside IPv6 (::ffff:a.b.c.d, 6to4 2002:aabb:ccdd::) reaches that IPv4 address.
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None:
            return _is_internal(embedded)
    return (
        ip.is_loopback
        or ip.is_link_local
        or ip.is_private
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )
