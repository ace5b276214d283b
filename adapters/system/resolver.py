"""SystemResolver: DNS through the event loop's resolver (runs in a thread, never blocks)."""

import asyncio
import socket
from collections.abc import Sequence

from application.errors import ApplicationError


class SystemResolver:
    async def resolve(self, host: str) -> Sequence[str]:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, None, type=socket.SOCK_STREAM
            )
        except (OSError, UnicodeError) as exc:  # UnicodeError: labels like "a..b"
            raise ApplicationError(f"cannot resolve {host!r}: {exc}") from exc
        return sorted({str(info[4][0]) for info in infos})
