"""SessionKeeper: the worker's one session in the fleet, and the one trust rule every
connection reads.

One heartbeat per worker: the keeper renews its worker session every
`heartbeat_interval_s` with the load it carries; no connection renews anything. Every
connection this worker holds is held through that session, so whether any of them may still
be read and written is one question, answered here:

    trusted until `lease_ms - self_fence_margin_ms` after the START of the last successful
    renew (or open) call, on the monotonic clock.

The margin covers clock skew between workers plus store latency (docs/decisions.md); past the
deadline nothing is read or written even if the store is unreachable, so this worker never
overlaps a new owner. A renew the store refuses (the session expired or was ended) fences every
connection at once, and the keeper opens a new session under a new id: a dead session never
comes back, and nothing acquired under it is trusted again.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from application.errors import StoreUnavailable, WorkerIdInUse
from application.ports.metrics import LEASES_LOST, RENEW_LATENCY_MS, SELF_FENCES, STORE_ERRORS
from application.worker.backoff import Backoff
from application.worker.context import WorkerContext
from domain import LEAVING_CAPACITY, InvalidCommand, WorkerSession

log = logging.getLogger(__name__)
T = TypeVar("T")

SESSION_SEPARATOR = "#"
# Heartbeats that may wait for the store at once (see SessionKeeper.run).
MAX_RENEWS_IN_FLIGHT = 3
# Session ids refused in a row before opening gives up (see SessionKeeper.open).
MAX_IDS_REFUSED = 3


def session_id_of(worker_id: str, incarnation: int) -> str:
    """A worker's n-th session: the worker id stays readable in `wsfleet status`."""
    return f"{worker_id}{SESSION_SEPARATOR}{incarnation}"


def worker_of(session_id: str) -> str:
    return session_id.rsplit(SESSION_SEPARATOR, 1)[0]


def incarnation_of(session_id: str) -> int:
    """`w-1#3` -> 3; 0 for an id not made by `session_id_of`."""
    _, _, number = session_id.rpartition(SESSION_SEPARATOR)
    return int(number) if number.isdecimal() else 0


class SessionKeeper:
    def __init__(
        self,
        ctx: WorkerContext,
        load: Callable[[], int],
        rate: Callable[[int], float] = lambda now_ms: 0.0,
    ) -> None:
        self._ctx = ctx
        self._load = load  # connections held now, reported with each renew
        self._rate = rate  # their messages a second, sampled at the instant given, reported too
        self._trusted_s = ctx.config.trusted_s
        self._incarnation = 0  # of the last session id tried
        self.session_id = ""  # none until `open` succeeds
        self._deadline = float("-inf")
        # Resolved when the current session stops being trusted; a fresh one per session.
        self._fenced: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._backoff = Backoff(0.05 * ctx.config.heartbeat_interval_s, 1.0, ctx.rng)
        self.last_renewed: float | None = None  # monotonic, for the health check
        # Shutting down: every renew from now on reports a capacity of 0 (WorkerSession.leaving).
        self.leaving = False

    # -- the rule, read by every connection --------------------------------------------------

    def trusts(self, session_id: str) -> bool:
        """Connections acquired under `session_id` may still be read and written now. A pure
        read: the fence itself (its future, its metrics, its log line) is the heartbeat
        loop's, which wakes at the deadline (`run`)."""
        return (
            session_id == self.session_id
            and not self._fenced.done()
            and self._ctx.clock.monotonic() < self._deadline
        )

    @property
    def trusted(self) -> bool:
        """The current session is trusted: this worker may take and hold connections."""
        return self.trusts(self.session_id)

    def remaining_s(self) -> float:
        return max(0.0, self._deadline - self._ctx.clock.monotonic())

    def fenced(self) -> "asyncio.Future[None]":
        """Done when the current session stops being trusted (each connection awaits it)."""
        return self._fenced

    # -- the session's life ------------------------------------------------------------------

    async def open(self) -> None:
        """Open a new session, retrying while the store is unreachable (nothing can be taken
        without one). Each incarnation has a new id: a dead session id is never reused.

        Raises WorkerIdInUse if it finds a live session of this worker id that this keeper did
        not open: at the first open, any live `<worker id>#<n>`; at every open, the id tried
        (another process started under this id meanwhile and won the race for it)."""
        ctx = self._ctx
        if self.session_id:
            # The fenced session's connections are closed here already: end it, so that any
            # it still owns are orphans now rather than when it expires. Best effort.
            await self.end("fenced")
        else:
            self._skip_past(await self._until_answered(ctx.store.list_sessions))
        attempt = refused = 0
        while True:
            self._incarnation += 1
            session_id = session_id_of(ctx.worker_id, self._incarnation)
            started = ctx.clock.monotonic()
            try:
                await ctx.store.open_session(
                    session_id,
                    ctx.config.lease_ms,
                    ctx.config.max_connections,
                    ctx.clock.now_ms(),
                )
            except InvalidCommand:
                # The id was used: by a dead incarnation of this worker id (take the next one)
                # or by another process under this id since the first look (live: refused).
                # Never by an earlier try of ours: every try has a new id, and a store
                # recognizes its own write whose answer was lost (the DynamoDB store's
                # write_id). Anything else refused (an id the store cannot hold) never heals.
                found = await self._until_answered(ctx.store.get_session, session_id)
                self._refuse_if_live(found)
                refused += 1
                if refused > MAX_IDS_REFUSED:
                    raise
                continue
            except StoreUnavailable as exc:
                attempt += 1
                ctx.metrics.count(STORE_ERRORS)
                log.warning("opening the worker session failed, retrying: %s", exc)
                await ctx.clock.sleep(self._backoff.delay(attempt))
                continue
            self.session_id = session_id
            self._deadline = started + self._trusted_s
            self.last_renewed = started
            if self._fenced.done():
                self._fenced = asyncio.get_running_loop().create_future()
            log.info("worker session %s opened", session_id, extra={"worker_id": ctx.worker_id})
            return

    async def _until_answered(self, read: Callable[..., Awaitable[T]], *args: Any) -> T:
        """`read(*args)` from the store, retried with back-off while it is unreachable."""
        attempt = 0
        while True:
            try:
                return await read(*args)
            except StoreUnavailable as exc:
                attempt += 1
                self._ctx.metrics.count(STORE_ERRORS)
                log.warning("reading the worker sessions failed, retrying: %s", exc)
                await self._ctx.clock.sleep(self._backoff.delay(attempt))

    def _skip_past(self, sessions: Sequence[WorkerSession]) -> None:
        """Start numbering after this worker id's sessions, refusing if one of them is live."""
        for session in sessions:
            if worker_of(session.session_id) == self._ctx.worker_id:
                self._refuse_if_live(session)
                self._incarnation = max(self._incarnation, incarnation_of(session.session_id))

    def _refuse_if_live(self, session: WorkerSession | None) -> None:
        now_ms = self._ctx.clock.now_ms()
        if session is None or not session.is_live(now_ms):
            return
        worker_id = self._ctx.worker_id
        raise WorkerIdInUse(
            f"worker id {worker_id!r} is in use: its session {session.session_id!r} is live "
            f"(its lease runs {max(0, session.expires_at_ms - now_ms) / 1000:.1f}s more), so "
            "another worker runs under this id. Give each worker an id of its own, new at "
            "every start (leave WSFLEET_WORKER_ID unset to get one); if that worker is gone, "
            f"`wsfleet end-session --worker {worker_id}` ends its session now"
        )

    async def run(self) -> None:
        """The heartbeat, forever (cancelled at shutdown). Fences the moment trust runs out,
        even while renewals are stuck on an unreachable store, then opens a new session.

        Renewals are hedged: a heartbeat does not wait for the previous one to answer (up to
        MAX_RENEWS_IN_FLIGHT at once). Every connection hangs on this one session, so one
        request that a store takes a second to answer must not fence them all when the next
        would have been answered in milliseconds (DynamoDB Local answers some in a second)."""
        ctx = self._ctx
        clock, interval = ctx.clock, ctx.config.heartbeat_interval_s
        in_flight: set[asyncio.Task[None]] = set()
        failed: list[BaseException] = []

        def settled(task: "asyncio.Task[None]") -> None:
            in_flight.discard(task)
            if not task.cancelled() and task.exception() is not None:
                failed.append(task.exception())  # type: ignore[arg-type]

        # Beats count from the start of the call that opened the session, as trust does.
        next_beat = self._opened_at() + interval
        try:
            while True:
                await clock.sleep(
                    max(0.001, min(next_beat - clock.monotonic(), self.remaining_s()))
                )
                if failed:
                    raise failed[0]  # a bug, not the store: the worker must fail loudly
                if not self.trusted:
                    self._fence("session no longer trusted: self-fencing")
                    await _cancel(in_flight)
                    await self.open()
                    next_beat = self._opened_at() + interval
                    continue
                if clock.monotonic() < next_beat:
                    continue
                next_beat += interval
                if next_beat < clock.monotonic():  # late (a frozen process): no catch-up burst
                    next_beat = clock.monotonic() + interval
                if len(in_flight) < MAX_RENEWS_IN_FLIGHT:
                    task = asyncio.create_task(self._renew(self.session_id))
                    in_flight.add(task)
                    task.add_done_callback(settled)
        finally:
            await _cancel(in_flight)

    def _opened_at(self) -> float:
        return self._ctx.clock.monotonic() if self.last_renewed is None else self.last_renewed

    async def _renew(self, session_id: str, *, again: bool = False) -> None:
        """One heartbeat, retried with back-off while trust lasts and no later heartbeat has
        succeeded (`again`: until this one has, as the others may carry the report before a
        change). A refusal fences everything."""
        ctx = self._ctx
        attempt = 0
        began = ctx.clock.monotonic()
        while self.trusts(session_id) and (
            again or self.last_renewed is None or self.last_renewed < began
        ):
            started = ctx.clock.monotonic()
            now_ms = ctx.clock.now_ms()
            rate_milli = round(1000 * self._rate(now_ms))
            try:
                renewed = await ctx.store.renew_session(
                    session_id,
                    ctx.config.lease_ms,
                    min(self._load(), ctx.config.max_connections),
                    LEAVING_CAPACITY if self.leaving else ctx.config.max_connections,
                    now_ms,
                    rate_milli,
                )
            except StoreUnavailable as exc:
                attempt += 1
                ctx.metrics.count(STORE_ERRORS)
                log.warning("session renew failed, retrying within the lease: %s", exc)
                await ctx.clock.sleep(min(self._backoff.delay(attempt), self.remaining_s()))
                continue
            ctx.metrics.timing(RENEW_LATENCY_MS, (ctx.clock.monotonic() - started) * 1000)
            if session_id != self.session_id or self._fenced.done():
                return  # the answer for a session already given up on
            if renewed is None:
                # Expired (we were frozen or cut off longer than the lease) or ended by
                # someone who believed us dead: our connections may be someone else's already.
                self._fence("worker session is no longer live: fencing every connection")
                return
            # Trust only what this call proves, measured from its start.
            self._deadline = max(self._deadline, started + self._trusted_s)
            self.last_renewed = max(self.last_renewed or started, started)
            return

    async def leave(self) -> None:
        """Say the worker is leaving: a renew now, and every renew after, reports a capacity of
        0. Every other worker's next look at the fleet (a quarter of a heartbeat apart while it
        holds back for the workers short of their share) then splits this one's connections
        among themselves, so that their handoff hints find takers at once. A hint says it too,
        but only to whoever receives one, and a worker holding back receives none (bench/
        RESULTS.md section 35: the rolling deploy's hints waited 0.45 s for a first receive).
        A failure only leaves that to the hints."""
        self.leaving = True
        if self.trusted:
            await self._renew(self.session_id, again=True)

    async def end(self, reason: str) -> None:
        """Leave the fleet: whatever this worker still holds becomes an orphan at once.
        A failure costs only the wait for the session to expire."""
        ctx = self._ctx
        if not self.session_id:
            return
        self._fence(None)
        try:
            await ctx.store.end_session(self.session_id, reason, ctx.clock.now_ms())
        except StoreUnavailable as exc:
            log.warning("ending the worker session failed (it will expire): %s", exc)

    def _fence(self, why: str | None) -> None:
        if self._fenced.done():
            return
        self._fenced.set_result(None)
        self._deadline = float("-inf")
        if why is not None:
            self._ctx.metrics.count(SELF_FENCES)
            self._ctx.metrics.count(LEASES_LOST, self._load())
            log.warning(why, extra={"worker_id": self._ctx.worker_id})


async def _cancel(tasks: set["asyncio.Task[None]"]) -> None:
    pending = list(tasks)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
