"""Lease: one connection's hold, as the worker sees it — its token, and trusted exactly while
the worker session it was acquired under is (the SessionKeeper's rule; nothing here renews)."""

import asyncio
import logging

from application.ports.metrics import LEASES_LOST
from application.worker.context import WorkerContext
from application.worker.session_keeper import SessionKeeper

log = logging.getLogger(__name__)


class Lease:
    def __init__(
        self,
        ctx: WorkerContext,
        keeper: SessionKeeper,
        connection_id: str,
        token: int,
        session_id: str,
        fenced: "asyncio.Future[None]",
    ) -> None:
        self._ctx = ctx
        self._keeper = keeper
        self.connection_id = connection_id
        self.token = token
        self.session_id = session_id  # the session it was acquired under
        self.fenced = fenced  # done when that session stops being trusted
        self.taken_over = False  # another owner provably holds it: one writer, `lost`
        self._invalid = False

    def valid(self) -> bool:
        """Trusted now. Once not, never again: a later renew must not revive a lease whose
        messages were already dropped (that would leave a gap behind the checkpoint)."""
        if self._invalid:
            return False
        if self.taken_over or not self._keeper.trusts(self.session_id):
            self._invalid = True
            return False
        return True

    def lost(self, why: str) -> None:
        """Another owner provably holds the connection (`why`: the sink holds a newer token,
        the store names another owner), whatever our session says. Never trusted again;
        counted and logged once, however many say so."""
        if not self.taken_over:
            self.taken_over = True
            self._ctx.metrics.count(LEASES_LOST)
            log.info(
                "lease lost (%s)", why, extra=self._ctx.log_extra(self.connection_id, self.token)
            )

    def remaining_s(self) -> float:
        return self._keeper.remaining_s() if self.valid() else 0.0
