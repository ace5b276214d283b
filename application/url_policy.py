"""Which upstream URLs workers may open, and at which addresses (SSRF protection).

Workers open URLs that API callers send, from inside the VPC. `vet` decides once per connect:
it resolves the host ONCE, checks every address, and returns them; the connector then
connects to one of those addresses (keeping the URL's host for the Host header, TLS SNI and
certificate checks) and never resolves the name again. A name that answers a public address to
the check and an internal one to the connect (DNS rebinding) therefore gets nowhere.

By default an address is refused when it is loopback, link-local, private, reserved,
unspecified, multicast or otherwise not global. An allow-list of host names or suffixes narrows
the hosts START may name; `allow_private=True` lifts the private-address check for local use
and tests, but never for the cloud metadata services (every link-local address, the AWS IPv6
metadata range, Alibaba's 100.100.100.200), in any spelling: decimal, hex or octal IPv4, or
IPv4 inside IPv6. The router checks at START and the worker again before every connect.

Refusals say what is wrong in their message (safe for API callers) and keep the addresses
and the resolver's text in `detail` (for logs only).
"""

import ipaddress
import logging
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import urlsplit

import attrs

from application.errors import ApplicationError, UpstreamRejected
from domain import validate_ws_url

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
log = logging.getLogger(__name__)

# Reached from any cloud instance whatever the network's rules: never an upstream.
_METADATA_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # link-local: AWS/GCP/Azure metadata at 169.254.169.254, ECS at .170.2
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::/32",  # AWS's IPv6 services: metadata fd00:ec2::254, DNS ::253, NTP ::123
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class ForbiddenUrl(UpstreamRejected):
    """The URL's host is not one workers may connect to. `str()` is safe to show callers;
    `detail` (addresses, resolver text) is for logs."""

    def __init__(self, message: str, detail: str = "", *, internal: bool = False) -> None:
        super().__init__(message)
        self.detail = detail
        self.internal = internal  # refused for an internal address: allow-private would admit it


class HostResolver(Protocol):
    async def resolve(self, host: str) -> Sequence[str]:
        """IP addresses of `host`; raises ApplicationError if it does not resolve."""
        ...


@attrs.frozen
class VettedUrl:
    """A URL and the addresses it may be opened at: every address its host resolved to."""

    url: str
    host: str
    addresses: tuple[str, ...]


@attrs.frozen
class UrlPolicy:
    resolver: HostResolver
    allowed_hosts: tuple[str, ...] = ()  # "feeds.example.com" or ".example.com" (suffix)
    allow_private: bool = False

    async def check(self, ws_url: str) -> None:
        """Raises InvalidCommand (not ws/wss) or ForbiddenUrl."""
        await self.vet(ws_url)

    async def vet(self, ws_url: str) -> VettedUrl:
        """The addresses `ws_url` may be opened at. Raises InvalidCommand or ForbiddenUrl."""
        validate_ws_url(ws_url)
        host = (urlsplit(ws_url).hostname or "").lower().rstrip(".")
        if self.allowed_hosts and not any(_matches(host, a) for a in self.allowed_hosts):
            raise ForbiddenUrl(f"host {host!r} is not in the allowed upstream hosts")
        literal = ip_literal(host)
        if literal is not None:
            addresses: Sequence[str] = [str(literal)]
        else:
            try:
                addresses = await self.resolver.resolve(host)
            except ApplicationError as exc:
                raise _refused(f"host {host!r} does not resolve", str(exc)) from exc
        if not addresses:  # nothing to check is not the same as nothing wrong
            raise ForbiddenUrl(f"host {host!r} resolves to no address")
        vetted = []
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            if is_metadata(ip):
                raise _refused(
                    f"host {host!r} resolves to a cloud metadata or link-local address",
                    f"{host!r} -> {ip}",
                )
            if not self.allow_private and _is_internal(ip):
                raise _refused(
                    f"host {host!r} resolves to an internal address; "
                    "set the allow-private setting only for local development",
                    f"{host!r} -> {ip}",
                    internal=True,
                )
            vetted.append(str(ip))
        return VettedUrl(ws_url, host, tuple(vetted))


def _refused(message: str, detail: str, *, internal: bool = False) -> ForbiddenUrl:
    """The refusal, its detail logged here: the router's and the worker's logs both say
    where the name pointed, while the message (the API's 400 body) does not."""
    log.info("upstream URL refused: %s (%s)", message, detail)
    return ForbiddenUrl(message, detail, internal=internal)


def ip_literal(host: str) -> IpAddress | None:
    """`host` as an address when it is one in any spelling the C resolver accepts: dotted,
    decimal (2852039166), hex (0xa9fea9fe), octal (0251.0376.0251.0376), shortened (169.16689662),
    or IPv6 (brackets already removed by urlsplit). None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        value = _inet_aton_number(part)
        if value is None:
            return None
        values.append(value)
    # inet_aton: the last part fills all the bytes the earlier parts did not.
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def _inet_aton_number(part: str) -> int | None:
    try:
        if part[:2].lower() == "0x":
            return int(part[2:] or "0", 16)
        if len(part) > 1 and part.startswith("0"):
            return int(part[1:], 8)
        return int(part, 10) if part.isdigit() else None
    except ValueError:
        return None


def is_metadata(ip: IpAddress) -> bool:
    """A cloud metadata or link-local address, itself or inside an IPv6 address."""
    return any(
        candidate.version == net.version and candidate in net
        for candidate in (ip, *_embedded_ipv4(ip))
        for net in _METADATA_NETWORKS
    )


def _embedded_ipv4(ip: IpAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address reaches or names: mapped (::ffff:a.b.c.d), 6to4,
    NAT64 (64:ff9b::a.b.c.d, translated by DNS64 networks), IPv4-compatible (::a.b.c.d)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def _matches(host: str, allowed: str) -> bool:
    allowed = allowed.lower().rstrip(".")
    if allowed.startswith("."):
        return host.endswith(allowed) or host == allowed[1:]
    return host == allowed


def _is_internal(ip: IpAddress) -> bool:
    if any(_is_internal(embedded) for embedded in _embedded_ipv4(ip)):
        return True
    return (
        ip.is_loopback
        or ip.is_link_local
        or ip.is_private
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )
