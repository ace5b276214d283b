"""The HTTP servers' common ground on aiohttp.web: a listener with a connection cap that idle
sockets cannot fill, and the Host rules both servers check (see each module)."""

from entrypoints.web.hosts import host_name, is_ip_literal, is_loopback_bind
from entrypoints.web.listener import ANY_PATH, BadRequestBody, Listener

__all__ = [
    "ANY_PATH",
    "BadRequestBody",
    "Listener",
    "host_name",
    "is_ip_literal",
    "is_loopback_bind",
]
