"""Host header values and bind addresses, as the servers' perimeter checks read them.

DNS rebinding (a page on attacker.example whose name is re-pointed at 127.0.0.1) always
arrives with the attacker's *name* in Host; a browser never sends an IP literal it was not
pointed at by address. So a server may accept any IP literal safely, and must check names.
"""

import ipaddress

_LOOPBACK_NAMES = frozenset({"localhost"})


def host_name(value: str) -> str:
    """The name in a Host header value: lower case, without the port, IPv6 brackets or a
    final dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def is_ip_literal(name: str) -> bool:
    """`name` (from host_name) is an IPv4 or IPv6 address, not a name."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback_bind(host: str) -> bool:
    """Only this machine can reach a server bound to `host` (a loopback address or
    `localhost`). Any other name or address, 0.0.0.0 and :: included, is reachable from
    the network."""
    name = host_name(host) if host.startswith("[") else host.strip().lower().rstrip(".")
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
