"""StaticResolver: a HostResolver over a fixed table, so URL-policy tests never touch DNS."""

import ipaddress
from collections.abc import Mapping, Sequence

from application.errors import ApplicationError


class StaticResolver:
    """Resolves names from `table`; an IP literal resolves to itself, like getaddrinfo."""

    def __init__(self, table: Mapping[str, Sequence[str]] | None = None) -> None:
        self._table = dict(table or {})
        self.asked: list[str] = []

    async def resolve(self, host: str) -> Sequence[str]:
        self.asked.append(host)
        if host in self._table:
            return self._table[host]
        try:
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            raise ApplicationError(f"cannot resolve {host!r}: no such host") from None
