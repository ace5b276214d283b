"""ConnectionSession: everything one worker does for one connection it owns.

Two loops run side by side — the lease watch (the worker session's fence, and a checkpoint
written at a low rate) and the upstream stream — plus a stop signal (STOP seen, or shutdown).
The first to finish ends them all (streaming must not go on after a lost lease or a STOP);
then `finish` always runs: it drains what was received, while the lease is
still trusted, and hands the connection back in the way the ending calls for. Messages go to
the worker's shared IngestWriter. Nothing here renews: the worker's one session does.
"""

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable

from application.aio import first_completed
from application.errors import (
    QueueUnavailable,
    StoreUnavailable,
    UpstreamRejected,
    UpstreamUnavailable,
)
from application.hints import send_hints
from application.ports import HintOrigin
from application.ports.metrics import (
    LEASE_RELEASES,
    MESSAGES_SKIPPED,
    REPLAYS_DROPPED,
    UPSTREAM_GIVE_UPS,
    UPSTREAM_RECONNECTS,
)
from application.worker.admission import Admission, AdmissionPolicy, Verdict
from application.worker.backoff import Backoff
from application.worker.context import WorkerContext
from application.worker.ingest import Fenced, IngestWriter, Rejected
from application.worker.lease import Lease
from domain import (
    CheckpointRegressed,
    Connection,
    DesiredState,
    DomainError,
    LeaseLost,
    failures_after,
)

log = logging.getLogger(__name__)


class UpstreamFault(Exception):
    """The upstream broke the message contract (docs/decisions.md): its connection alone is
    given up, with the persisted back-off."""


class SessionEnd(enum.Enum):
    STOPPED = "STOPPED"  # desired state went to STOPPED (or the item vanished)
    SHUTDOWN = "SHUTDOWN"  # this worker is leaving: hand over
    STREAM_ENDED = "STREAM_ENDED"  # the upstream finished normally
    UPSTREAM_FAILED = "UPSTREAM_FAILED"  # the upstream kept failing: back off fleet-wide
    LEASE_LOST = "LEASE_LOST"  # another owner, or our lease can no longer be trusted
    REBALANCE = "REBALANCE"  # this worker holds more than its share: hand over, as at shutdown
    ERROR = "ERROR"  # a bug or an unexpected failure: release so another worker tries


# Endings that hand back a connection still wanted and fit for another owner now: hinted at
# once. (A shutdown's connections are hinted by the worker as they are released; STOP and a
# normal end want no owner; an upstream given up on rests until its back-off ends; an
# unexpected error is left to the next scan, so that a connection that keeps failing is not
# passed around in a hot loop.)
_STILL_WANTED = frozenset({SessionEnd.LEASE_LOST, SessionEnd.REBALANCE})


# Why a lease was given back, as the ownership log says it (LeaseReleased.reason).
RELEASE_REASONS = {
    SessionEnd.STOPPED: "stopped",
    SessionEnd.SHUTDOWN: "shutdown",
    SessionEnd.STREAM_ENDED: "stream ended",
    SessionEnd.UPSTREAM_FAILED: "upstream failed",
    SessionEnd.LEASE_LOST: "lease not trusted",
    SessionEnd.REBALANCE: "rebalance",
    SessionEnd.ERROR: "error",
}


class ConnectionSession:
    def __init__(
        self,
        ctx: WorkerContext,
        acquired: Connection,
        lease: Lease,
        resume_checkpoint: int,
        writer: IngestWriter,
        handed_back: Callable[[str, "SessionEnd"], None],
    ) -> None:
        """`resume_checkpoint` is where this owner resumes: the stored checkpoint, or further
        on when the sink shows more durably stored (a takeover after a crash). `handed_back`
        is told the moment the store has the connection back, before its hint goes out."""
        self._ctx = ctx
        self.connection_id = acquired.connection_id
        self.ws_url = acquired.ws_url
        self.failures = acquired.failures
        self._acquired_checkpoint = resume_checkpoint
        self._recorded_checkpoint = acquired.checkpoint_seq  # what the store holds
        self.lease = lease
        self.ingest = writer.buffer(self.lease, resume_checkpoint, self._writer_failed)
        self._writer = writer
        # A future, not a task waiting on an event: one object fewer per connection.
        self._stop: asyncio.Future[SessionEnd] = asyncio.get_running_loop().create_future()
        self._reconnect = Backoff(ctx.config.reconnect_base_s, ctx.config.reconnect_max_s, ctx.rng)
        self.end: SessionEnd | None = None
        self.fault: str | None = None  # why the upstream was given up on, if it broke the contract
        self._admission = Admission(
            resume_checkpoint,
            AdmissionPolicy(ctx.config.seq_jump_window, ctx.sink.max_message_bytes),
        )
        # When this session stored its first message: how long the upstream has streamed well.
        self._streaming_since_ms: int | None = None
        self.upstream_open = False  # true while an upstream stream is open (for status/tests)
        self.received = 0  # messages received from the upstream (its rate: Sessions.sample_rates)
        self._later: SessionEnd | None = None  # a stop asked for after the first (see _stopped)
        # The store has it back: no longer this worker's, though this task may still be
        # finishing (its hint can reach this worker's own poll first: Sessions.holds).
        self.handed_back = False
        self._handed_back = handed_back
        # Handed off to balance by load: the session it is meant for and its smoothed
        # messages a second, both said in its hint (HintOrigin.to and .rate;
        # domain/balance.py `pick_hand_offs`).
        self.meant_for: str | None = None
        self.rate_handed_off: float | None = None

    @property
    def token(self) -> int:
        return self.lease.token

    @property
    def stopping(self) -> bool:
        return self._stop.done()

    def request_stop(self, reason: SessionEnd) -> None:
        if not self._stop.done():
            self._stop.set_result(reason)
        elif self._later is None:
            self._later = reason  # ends a balancing handoff's wait for the sink (_stopped)

    def _writer_failed(self, reason: str) -> None:
        self.fault = self.fault or reason
        self.request_stop(SessionEnd.UPSTREAM_FAILED)

    async def run(self) -> SessionEnd:
        try:
            end = await first_completed(self._watch_lease(), self._stream(), self._stopped())
        except Exception:
            log.exception("session failed", extra=self._extra())
            end = SessionEnd.ERROR
        self.end = await self._finish(end)
        return self.end

    async def _stopped(self) -> SessionEnd:
        """The end asked for. A balancing handoff first waits, still streaming, until what was
        received when it was asked is stored: its drain would otherwise keep the stream
        without a subscriber for as long as the sink takes to answer (the soak: a handoff
        decided 0.26 s into a sink outage, before any write had failed, left 4 streams
        without a subscriber for the 3 s outage). Any other stop asked meanwhile (a STOP, the
        worker's shutdown, a failure) ends the wait and is the end."""
        end = await self._stop
        if end is SessionEnd.REBALANCE:
            ingest, received = self.ingest, self.ingest.next_seq - 1
            while (
                ingest.checkpoint < received
                and ingest.pending
                and not ingest.stalled
                and self._later is None
            ):
                await self._ctx.clock.sleep(self._ctx.config.ingest_flush_interval_s)
        return self._later or end

    async def _watch_lease(self) -> SessionEnd:
        """Ends the session the moment the worker session stops being trusted (one future
        for every connection: no timer per connection), and records the checkpoint every
        `checkpoint_interval_s` if it moved — the only per-connection write while streaming,
        so that a new owner after a crash has a recent point to resume from even with a sink
        that cannot say what it stored (docs/decisions.md)."""
        ctx = self._ctx
        interval = ctx.config.checkpoint_interval_s
        # Jittered, so connections taken together do not checkpoint in one burst.
        wait = interval * ctx.rng.uniform(0.5, 1.0)
        while self.lease.valid():
            await first_completed(asyncio.shield(self.lease.fenced), ctx.clock.sleep(wait))
            if not self.lease.valid():
                break
            await self._record_checkpoint()
            wait = interval
        return SessionEnd.LEASE_LOST

    async def _record_checkpoint(self) -> None:
        ctx, seq = self._ctx, self.ingest.checkpoint
        if seq <= self._recorded_checkpoint:
            return
        try:
            owned = await ctx.store.checkpoint(
                self.connection_id, self.lease.session_id, self.lease.token, seq, ctx.clock.now_ms()
            )
        except (StoreUnavailable, CheckpointRegressed) as exc:
            log.warning("checkpoint not recorded (next time): %s", exc, extra=self._extra())
            return
        if owned:
            self._recorded_checkpoint = seq
        else:
            self.lease.lost("the store names another owner")

    async def _stream(self) -> SessionEnd:
        ctx = self._ctx
        writer = self._writer
        attempts = 0  # consecutive failures without a message received
        while True:
            try:
                self._admission.reconnecting()
                # Vetted again (DNS may have changed), and opened at the vetted addresses only.
                target = await ctx.url_policy.vet(self.ws_url)
                if not self.lease.valid():
                    # Never subscribe without trust: a worker that wakes from a freeze must
                    # not reconnect before its fence is noticed.
                    return SessionEnd.LEASE_LOST
                async with ctx.upstream.open(
                    self.ws_url, self.ingest.next_seq, target.addresses
                ) as stream:
                    self.upstream_open = True
                    try:
                        async for message in stream.messages():
                            # A plain sum, read where metrics are published: a metrics call
                            # per message costs microseconds at thousands of messages a second.
                            writer.received += 1
                            self.received += 1
                            await self._admitted(self._admission.receive(message))
                            attempts = 0
                    finally:
                        self.upstream_open = False
                await self._admitted(self._admission.stream_ended())
                return SessionEnd.STREAM_ENDED
            except Fenced:
                return SessionEnd.LEASE_LOST
            except (UpstreamFault, Rejected) as exc:
                self.fault = self.fault or str(exc)
                log.warning("upstream broke the message contract: %s", exc, extra=self._extra())
                return SessionEnd.UPSTREAM_FAILED
            except UpstreamRejected as exc:
                log.warning("upstream rejected: %s", exc, extra=self._extra())
                return SessionEnd.UPSTREAM_FAILED
            except UpstreamUnavailable as exc:
                attempts += 1
                if attempts >= ctx.config.reconnect_attempts:
                    log.warning("upstream failed %d times: %s", attempts, exc, extra=self._extra())
                    return SessionEnd.UPSTREAM_FAILED
                ctx.metrics.count(UPSTREAM_RECONNECTS)
                log.info("upstream dropped, reconnecting: %s", exc, extra=self._extra())
                await ctx.clock.sleep(self._reconnect.delay(attempts))

    async def _admitted(self, verdict: Verdict) -> None:
        """Act on one verdict of the admission rules. Raises UpstreamFault."""
        if verdict.skipped is not None:
            self._gap(*verdict.skipped)
        for seq, data in verdict.accept:
            await self.ingest.put(seq, data)
        if verdict.accept and self._streaming_since_ms is None:
            self._streaming_since_ms = self._ctx.clock.now_ms()
        if verdict.replay:
            # Replayed by the upstream (a resume overlap): already have it.
            self._ctx.metrics.count(REPLAYS_DROPPED)
        if verdict.fault is not None:
            self._ctx.metrics.count(verdict.fault.counter)
            raise UpstreamFault(verdict.fault.reason)

    async def _finish(self, end: SessionEnd) -> SessionEnd:
        """Drain, then hand back. Store hiccups are retried while the budget lasts. Returns
        the ending as handed back: a connection whose upstream broke the contract is given up
        on with the persisted back-off, whatever else ended the session (a shutdown too), so
        that it does not circulate through the fleet."""
        if self._admission.holding_ahead is not None:
            log.info(
                "seq %d, after a gap, is not stored: the session ended before a later message "
                "confirmed the gap (the next owner asks for seq %d on)",
                self._admission.holding_ahead,
                self.ingest.next_seq,
                extra=self._extra(),
            )
        if self._admission.holding_unnumbered:
            log.warning(
                "a resumed stream's first message, without a seq, is not stored: the session "
                "ended before the stream said whether it numbers its messages",
                extra=self._extra(),
            )
        if self.lease.taken_over:
            return SessionEnd.LEASE_LOST  # someone else owns it now: nothing of ours to write
        # Once not trusted, nothing more is written: the new owner resumes from our checkpoint.
        with contextlib.suppress(Fenced):
            await self.ingest.drain()
        # Everything received is stored (messages dropped when trust ended are not).
        drained = self.ingest.checkpoint >= self.ingest.next_seq - 1
        if self.lease.taken_over:
            return SessionEnd.LEASE_LOST  # the sink saw a newer token while draining
        if self.fault is not None:
            end = SessionEnd.UPSTREAM_FAILED
        elif end is SessionEnd.STREAM_ENDED and not drained:
            # The upstream ended, but its last messages are not stored and cannot be now:
            # ending the stream at this checkpoint would lose them for good. Handed back
            # still wanted instead: the next owner resumes after the checkpoint, receives
            # the tail again and sees the end itself.
            end = SessionEnd.LEASE_LOST
        attempt = 0
        while True:
            attempt += 1
            try:
                after = await self._hand_back(end)
            except LeaseLost:
                # After a failed attempt this may be that attempt's own write, its answer lost
                # (the soak: a balancing handoff's connection then waited 15 s for a scan with
                # no owner). Hinted as if it had answered: a connection someone else holds by
                # now only costs the taker a refused acquire.
                if attempt > 1 and end in _STILL_WANTED:
                    await self._released(end, hint=True)
                return end
            except (StoreUnavailable, DomainError) as exc:
                log.warning("hand-back attempt %d failed: %s", attempt, exc, extra=self._extra())
                # A store that fails is retried for as long as the lease is trusted: given up
                # on, the connection would stay held by this live session and streamed by
                # nobody (the soak: three throttled releases of a balancing handoff left c05
                # without a subscriber for good). Once untrusted, the session's end makes it
                # an orphan. A refusal is not retried past three attempts.
                if attempt >= 3 and (isinstance(exc, DomainError) or not self.lease.valid()):
                    return end
                await self._ctx.clock.sleep(min(1.0, 0.1 * attempt))
                continue
            # A STOP honoured just as a START came back: the START's hint found the
            # connection still held, and nothing else would take it before the next full
            # scan, a minute later. Hinted like any connection still wanted.
            restarted = end is SessionEnd.STOPPED and after.desired_state is DesiredState.STARTED
            await self._released(end, hint=end in _STILL_WANTED or restarted)
            return end

    async def _released(self, end: SessionEnd, *, hint: bool) -> None:
        """The store has the connection back: said to the worker, then hinted if `hint`."""
        self.handed_back = True
        self._handed_back(self.connection_id, end)
        if hint:
            await self._hint()

    async def _hint(self) -> None:
        """Tell the fleet the connection is free now: otherwise it waits for someone's
        next scan. A lost hint only costs that wait."""
        try:
            origin = HintOrigin(self.lease.session_id, to=self.meant_for, rate=self.rate_handed_off)
            await send_hints(self._ctx.queue, [self.connection_id], self._extra(), origin)
        except QueueUnavailable as exc:
            log.warning("hint after hand-back not sent: %s", exc, extra=self._extra())

    async def _hand_back(self, end: SessionEnd) -> Connection:
        """Hand the connection back as `end` calls for; returns the state after it."""
        ctx, lease = self._ctx, self.lease
        args = (self.connection_id, lease.session_id, lease.token, self.ingest.checkpoint)
        if end is SessionEnd.STREAM_ENDED:
            after = await ctx.store.end_stream(*args, ctx.clock.now_ms())
        elif end is SessionEnd.UPSTREAM_FAILED:
            ctx.metrics.count(UPSTREAM_GIVE_UPS)
            now = ctx.clock.now_ms()
            healthy = self._streamed_well(now)
            progressed = healthy and self.ingest.checkpoint > self._acquired_checkpoint
            failures = failures_after(self.failures, progressed=progressed)
            backoff = Backoff(
                ctx.config.poison_backoff_base_s, ctx.config.poison_backoff_max_s, ctx.rng
            )
            delay_s = backoff.delay(failures)
            reason = self.fault or "upstream kept failing"
            after = await ctx.store.report_upstream_failure(
                *args, now + int(delay_s * 1000), reason[:200], now, healthy=healthy
            )
        else:
            after = await ctx.store.release(*args, ctx.clock.now_ms(), reason=RELEASE_REASONS[end])
        ctx.metrics.count(LEASE_RELEASES)
        log.info("lease handed back (%s)", end.value, extra=self._extra())
        return after

    def _streamed_well(self, now_ms: int) -> bool:
        """Whether this session's upstream streamed for `upstream_healthy_s` since its first
        stored message: only then does its progress restart the failure count (one good
        message per connect, then poison, must still back off longer each time)."""
        since = self._streaming_since_ms
        return since is not None and now_ms - since >= self._ctx.config.upstream_healthy_s * 1000

    def _gap(self, first: int, last: int) -> None:
        # The upstream no longer had what we asked for (its replay buffer moved on): the
        # messages in between are gone for good. Say so loudly; never hide a loss.
        self._ctx.metrics.count(MESSAGES_SKIPPED, last - first + 1)
        log.error(
            "upstream skipped seqs %d..%d: messages lost upstream",
            first,
            last,
            extra=self._extra(),
        )

    def _extra(self) -> dict[str, object]:
        return self._ctx.log_extra(self.connection_id, self.lease.token)
