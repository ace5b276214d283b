"""Worker: one process's share of the fleet. Opens its worker session (the one thing it renews),
runs the loops, owns every task, shuts down gracefully: connections end concurrently, leases
are released with their final checkpoints, each released connection is hinted on the queue so
another worker takes it within about a second, and the session is ended so that anything not
released is an orphan at once instead of at its expiry."""

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Mapping

import attrs

from application.aio import first_completed
from application.config import WorkerConfig
from application.errors import ApplicationError
from application.hints import SECOND_ROUND_S, send_hints
from application.ports import (
    Clock,
    ConnectionStore,
    HintOrigin,
    MessageSink,
    Metrics,
    NotificationQueue,
    UpstreamConnector,
)
from application.ports.metrics import HANDOFF_LATENCY_MS
from application.url_policy import UrlPolicy
from application.worker.context import WorkerContext
from application.worker.ingest import IngestWriter
from application.worker.loops import (
    Heartbeats,
    measure_loop_lag,
    poll_queue,
    publish_metrics,
    reconcile,
    watch_stops,
)
from application.worker.session import SessionEnd
from application.worker.session_keeper import SessionKeeper
from application.worker.sessions import Sessions

log = logging.getLogger(__name__)


class WorkerFailed(Exception):
    """One of the worker's loops ended unexpectedly: the process must exit and be replaced."""


@attrs.frozen
class SessionView:
    connection_id: str
    token: int
    lease_remaining_ms: int
    checkpoint_seq: int
    upstream_open: bool


@attrs.frozen
class WorkerHealth:
    healthy: bool
    loops_alive: dict[str, bool]
    store_reached_age_s: float | None
    active_connections: int
    connections: list[SessionView]


class Worker:
    def __init__(
        self,
        *,
        worker_id: str,
        config: WorkerConfig,
        store: ConnectionStore,
        queue: NotificationQueue,
        upstream: UpstreamConnector,
        sink: MessageSink,
        metrics: Metrics,
        clock: Clock,
        url_policy: UrlPolicy,
        rng: random.Random | None = None,
    ) -> None:
        self.ctx = WorkerContext(
            worker_id=worker_id,
            config=config,
            store=store,
            queue=queue,
            upstream=upstream,
            sink=sink,
            metrics=metrics,
            clock=clock,
            url_policy=url_policy,
            rng=rng or random.Random(),
        )
        self.ingest = IngestWriter(self.ctx)
        self.keeper = SessionKeeper(
            self.ctx, lambda: len(self.sessions), lambda now_ms: self.sessions.sample_rates(now_ms)
        )
        self.sessions = Sessions(self.ctx, self.ingest, self.keeper)
        self._beats = Heartbeats()
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._shutdown = asyncio.Event()
        self._draining = asyncio.Event()  # the poll loop finishes its last receive, takes nothing
        self._started = self.ctx.clock.monotonic()

    @property
    def worker_id(self) -> str:
        return self.ctx.worker_id

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run(self) -> None:
        ctx = self.ctx
        log.info("worker starting", extra={"worker_id": ctx.worker_id})
        await self.keeper.open()  # nothing can be taken without a session
        self._loops["ingest"] = asyncio.create_task(
            self.ingest.run(), name=f"ingest:{ctx.worker_id}"
        )
        self._loops["session"] = asyncio.create_task(
            self.keeper.run(), name=f"session:{ctx.worker_id}"
        )
        for name, loop in (
            ("poll", functools.partial(poll_queue, draining=self._draining)),
            ("reconcile", functools.partial(reconcile, keeper=self.keeper)),
            ("stops", functools.partial(watch_stops, keeper=self.keeper)),
            ("metrics", functools.partial(publish_metrics, writer=self.ingest)),
            ("loop_lag", measure_loop_lag),
        ):
            self._loops[name] = asyncio.create_task(
                loop(ctx, self.sessions, self._beats), name=f"{name}:{ctx.worker_id}"
            )
        shutdown = asyncio.ensure_future(self._shutdown.wait())
        try:
            # A loop must never end on its own: a worker that renews its leases while, say,
            # its writer is dead stores nothing and hides it.
            await asyncio.wait([shutdown, *self._loops.values()], return_when="FIRST_COMPLETED")
            ended = [name for name, task in self._loops.items() if task.done()]
            if ended:
                await self._fail(ended[0])
            await self._graceful_shutdown()
        finally:
            shutdown.cancel()
            await self._cancel_loops()
            await self.sessions.cancel_all()

    async def _fail(self, name: str) -> None:
        """Stop renewing, hand back every lease with its checkpoint (which covers stored
        messages only; nothing more is written), and raise WorkerFailed."""
        task = self._loops[name]
        error = None if task.cancelled() else task.exception()
        log.critical(
            "worker loop %r ended unexpectedly: releasing every connection and exiting",
            name,
            exc_info=error,
            extra={"worker_id": self.ctx.worker_id},
        )
        self.ingest.close()
        self._draining.set()
        await self._cancel_loops(keep=("ingest", "session"))
        await self.sessions.stop_all(SessionEnd.ERROR, self.ctx.config.shutdown_budget_s)
        await self._end_session("worker failed")
        raise WorkerFailed(f"loop {name!r} ended unexpectedly") from error

    async def _graceful_shutdown(self) -> None:
        ctx = self.ctx
        began = ctx.clock.monotonic()
        log.info(
            "shutting down: handing over %d connections",
            len(self.sessions),
            extra={"worker_id": ctx.worker_id},
        )
        budget = ctx.config.shutdown_budget_s
        self._draining.set()  # take nothing new; the poll loop ends with its current receive
        # Connections still drain through ingest, and the session is renewed until they are
        # released.
        await self._cancel_loops(keep=("poll", "ingest", "session"))
        # Most of the budget for draining and releasing, each connection hinted as soon as it
        # is released; the rest for the last hints and metrics.
        stopped = asyncio.Event()
        # By load, the taker each heavy one is meant for and its rate, read before they stop
        # (their rates go with them): their hints say both (Balance.placement).
        meant_for = self.sessions.placement()
        hints = asyncio.create_task(
            self._hint_handed_over(stopped, began, meant_for), name="shutdown-hints"
        )
        # Beside the drain: the fleet learns that this worker is leaving from its session too
        # (SessionKeeper.leave), not only from the hints of those that receive one.
        leave = asyncio.create_task(self.keeper.leave(), name="shutdown-leave")
        try:
            await self.sessions.stop_all(SessionEnd.SHUTDOWN, budget * 0.8)
            stopped.set()
            await first_completed(asyncio.wait([hints]), ctx.clock.sleep(budget * 0.1))
        finally:
            for task in (hints, leave):
                task.cancel()
            await asyncio.gather(hints, leave, return_exceptions=True)
        await self._end_session("shutdown")
        await first_completed(ctx.metrics.flush(), ctx.clock.sleep(1.0))  # never raises
        poll = self._loops.get("poll")
        if poll is not None:
            # Until the last long poll returns (at once if it caught one of our hints, which
            # it then gives back), within what is left of the budget.
            left = budget - (ctx.clock.monotonic() - began)
            await first_completed(asyncio.wait([poll]), ctx.clock.sleep(max(0.0, left)))
        log.info(
            "shutdown complete: %d connections handed over in %.2fs",
            len(self.sessions.handed_over),
            ctx.clock.monotonic() - began,
            extra={"worker_id": ctx.worker_id},
        )

    async def _hint_handed_over(
        self,
        stopped: asyncio.Event,
        began: float,
        meant_for: Mapping[str, tuple[str, float]],
    ) -> None:
        """Hint the connections handed over at shutdown as they are released, each send
        carrying what was released since the last: the fleet does not wait for the slowest
        drain (the AWS fleet bench: the first of 9 was released 0.26 s before the last, and
        its hint waited for it). Each batch goes out a second time `SECOND_ROUND_S` after it
        was sent (application/hints.py: a worker killed lately may have left a long poll that
        catches the first). Returns once `stopped` is set and everything is sent, twice.
        Records, per connection hinted, how long after the shutdown began (`began`,
        monotonic) it was released and hinted: this worker's part of the handoff. The hints
        name this session as leaving (HintOrigin.leaving): a taker leaves it out of the split,
        so the connections go where the fleet is short in one move. By load a heavy one's
        names the session it is meant for and says its rate (`meant_for`)."""
        clock = self.ctx.clock
        # The session the connections were released under (still renewed until the end).
        session_id = self.keeper.session_id

        def by_origin(batch: list[str]) -> dict[HintOrigin | None, list[str]]:
            if not session_id:
                return {None: batch}
            groups: dict[HintOrigin | None, list[str]] = {}
            for cid in batch:
                to, rate = meant_for.get(cid, (None, None))
                origin = HintOrigin(session_id, leaving=True, to=to, rate=rate)
                groups.setdefault(origin, []).append(cid)
            return groups

        sent = 0
        second_rounds: list[tuple[float, list[str]]] = []  # (when due, monotonic; the batch)
        changed = self.sessions.handed_over_changed
        while True:
            changed.clear()
            handed = self.sessions.handed_over
            if sent < len(handed):
                batch, sent = handed[sent:], len(handed)
                try:
                    extra = {"worker_id": self.ctx.worker_id}
                    for origin, ids in by_origin(batch).items():
                        await send_hints(self.ctx.queue, ids, extra, origin)
                except ApplicationError as exc:
                    log.warning("handoff hints not sent (reconciliation will find them): %s", exc)
                else:
                    took_ms = (clock.monotonic() - began) * 1000
                    for _ in batch:
                        self.ctx.metrics.timing(HANDOFF_LATENCY_MS, took_ms)
                    second_rounds.append((clock.monotonic() + SECOND_ROUND_S, batch))
                continue
            if second_rounds and second_rounds[0][0] <= clock.monotonic():
                _, batch = second_rounds.pop(0)
                try:
                    for origin, ids in by_origin(batch).items():
                        await self.ctx.queue.send(ids, copy=True, origin=origin)
                except ApplicationError as exc:
                    log.info("%d handoff hint(s) went out once: %s", len(batch), exc)
                continue
            if stopped.is_set() and not second_rounds:
                return
            waits: list[Awaitable[object]] = [changed.wait()]
            if not stopped.is_set():
                waits.append(stopped.wait())
            if second_rounds:
                waits.append(clock.sleep(second_rounds[0][0] - clock.monotonic()))
            await first_completed(*waits)

    async def _end_session(self, reason: str) -> None:
        """Whatever was not released (a hand-back that failed) is an orphan at once."""
        session = self._loops.get("session")
        if session is not None:
            session.cancel()
            await asyncio.gather(session, return_exceptions=True)
        await first_completed(
            self.keeper.end(reason), self.ctx.clock.sleep(self.ctx.config.shutdown_budget_s * 0.1)
        )

    async def _cancel_loops(self, keep: tuple[str, ...] = ()) -> None:
        tasks = [task for name, task in self._loops.items() if name not in keep]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def health(self) -> WorkerHealth:
        ctx = self.ctx
        now_mono = ctx.clock.monotonic()
        loops_alive = {name: not task.done() for name, task in self._loops.items()}
        # The session's renewals prove the store is reachable too.
        reached = max(
            (t for t in (self._beats.store_reached, self.keeper.last_renewed) if t is not None),
            default=None,
        )
        sessions = list(self.sessions)
        views = [
            SessionView(
                connection_id=s.connection_id,
                token=s.token,
                lease_remaining_ms=int(s.lease.remaining_s() * 1000),
                checkpoint_seq=s.ingest.checkpoint,
                upstream_open=s.upstream_open,
            )
            for s in sessions
        ]
        age = None if reached is None else now_mono - reached
        lease_s = ctx.config.lease_ms / 1000
        recently = age is not None and age < 2 * max(lease_s, ctx.config.reconcile_interval_s)
        young = now_mono - self._started < 2 * lease_s
        healthy = bool(loops_alive) and all(loops_alive.values()) and (recently or young)
        return WorkerHealth(
            healthy=healthy,
            loops_alive=loops_alive,
            store_reached_age_s=age,
            active_connections=len(sessions),
            connections=views,
        )
