"""Random interleavings of every command from several workers over advancing time.

Each worker keeps its own belief of the lease it holds (token, the expiry it was granted, the
seq it has stored), exactly as a real worker would; after every step the domain must agree with
those beliefs and with its own history. Each rule also checks the command's outcome against a
short model of its precondition, so a refusal that should have been a grant fails too.
"""

from typing import Any

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from domain import (
    Acquire,
    Checkpointed,
    Command,
    Connection,
    DesiredState,
    DomainError,
    EndStream,
    Event,
    LeaseAcquired,
    LeaseStatus,
    LeaseTakenOver,
    Release,
    Renew,
    ReportUpstreamFailure,
    Start,
    Stop,
    UpstreamFailed,
    decide,
    fold,
)

WORKERS = ("w1", "w2", "w3")
CONNECTIONS = ("c1", "c2")
URLS = ("wss://a.example.com/feed", "wss://b.example.com/feed")

workers = st.sampled_from(WORKERS)
connections = st.sampled_from(CONNECTIONS)
lease_ms = st.sampled_from((500, 1_000, 3_000))
progress = st.integers(-1, 5)  # -1: a buggy worker reporting an older checkpoint


@attrs.define
class Belief:
    """What one worker thinks it holds on one connection."""

    token: int
    expires_at_ms: int
    stored_seq: int


class LeaseFleet(RuleBasedStateMachine):
    # (worker, connection) pairs that were granted a lease once: drawing one later replays
    # that worker's commands, with its current belief or, once it lost, its last token.
    grants = Bundle("grants")

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000
        self.states: dict[str, Connection] = {}
        self.histories: dict[str, list[Event]] = {cid: [] for cid in CONNECTIONS}
        self.granted_tokens: dict[str, list[int]] = {cid: [] for cid in CONNECTIONS}
        self.beliefs: dict[tuple[str, str], Belief] = {}
        self.last_token: dict[tuple[str, str], int] = {}
        self.last_seq: dict[tuple[str, str], int] = {}

    # -- executing a command, as a store would: decide, then evolve ------------------------

    def _execute(self, command: Command) -> list[Event] | DomainError:
        cid = command.connection_id
        before = self.states.get(cid)
        try:
            events = decide(before, command, self.now)
        except DomainError as refusal:
            assert self.states.get(cid) == before  # a refused command changes nothing
            return refusal
        after = fold(events, before)
        first = before.version + 1 if before else 1
        assert [e.version for e in events] == list(range(first, first + len(events)))
        assert all(e.connection_id == cid and e.at_ms == self.now for e in events)
        for event in events:
            if isinstance(event, LeaseAcquired | LeaseTakenOver):
                assert before is not None
                assert before.desired_state is DesiredState.STARTED
                assert event.token > max(self.granted_tokens[cid], default=0)
                self.granted_tokens[cid].append(event.token)
        kinds = {type(e) for e in events}
        if Checkpointed in kinds and UpstreamFailed not in kinds:
            assert after is not None
            assert after.failures == 0  # progress clears the upstream failure count
        if after is not None:
            if before is not None:
                assert after.checkpoint_seq >= before.checkpoint_seq
            self.states[cid] = after
        self.histories[cid] += events
        return events

    def _memory(self, grant: tuple[str, str], step: int) -> tuple[int, int]:
        """The token and the next checkpoint a worker would send for a connection."""
        belief = self.beliefs.get(grant)
        if belief is not None:
            return belief.token, max(0, belief.stored_seq + step)
        return self.last_token[grant], max(0, self.last_seq[grant] + step)

    def _learns(self, grant: tuple[str, str], belief: Belief | None) -> None:
        if belief is None:
            self.beliefs.pop(grant, None)
            return
        self.beliefs[grant] = belief
        self.last_token[grant], self.last_seq[grant] = belief.token, belief.stored_seq

    # -- the outside world ----------------------------------------------------------------

    @initialize()
    def start_every_connection(self) -> None:
        for cid in CONNECTIONS:
            assert isinstance(self._execute(Start(cid, URLS[0])), list)

    @rule(ms=st.integers(0, 300) | st.integers(0, 6_000))  # a heartbeat's gap, or past expiry
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule(offset=st.sampled_from([-1, 0, 1]))
    def time_reaches_the_next_lease_boundary(self, offset: int) -> None:
        """Jump to just before, at, or just after the next expiry or back-off end."""
        ahead = [
            c.available_at_ms + offset
            for c in self.states.values()
            if c.available_at_ms + offset > self.now
        ]
        if ahead:
            self.now = min(ahead)

    # One rule for the operator's START and STOP, so that STOP (which makes every acquire fail
    # until the next START) comes up in a third of the operator's turns, not in half of them.
    @rule(cid=connections, url=st.sampled_from((*URLS, None)))
    def operator_starts_or_stops(self, cid: str, url: str | None) -> None:
        before = self.states[cid]
        if url is None:
            assert isinstance(self._execute(Stop(cid)), list)
            assert self.states[cid].desired_state is DesiredState.STOPPED
            return
        outcome = self._execute(Start(cid, url))
        conflict = before.desired_state is DesiredState.STARTED and before.ws_url != url
        assert isinstance(outcome, DomainError) == conflict
        if before.desired_state is DesiredState.STARTED and not conflict:
            assert outcome == []  # a retried START is a no-op (it must not lift a back-off)
        after = self.states[cid]  # START never touches lease, token or checkpoint
        lease = ("owner", "token", "expires_at_ms", "checkpoint_seq")
        assert [getattr(after, f) for f in lease] == [getattr(before, f) for f in lease]

    # -- the workers ----------------------------------------------------------------------

    @rule(target=grants, worker=workers, cid=connections, lease=lease_ms)
    def acquire(self, worker: str, cid: str, lease: int) -> Any:
        before = self.states[cid]
        outcome = self._execute(Acquire(cid, worker, lease))
        may = (
            before.desired_state is DesiredState.STARTED
            and before.lease_status(self.now) is not LeaseStatus.HELD
            and before.not_before_ms < self.now
        )
        assert isinstance(outcome, list) == may
        if not isinstance(outcome, list):
            return multiple()
        (grant,) = outcome
        if before.lease_status(self.now) is LeaseStatus.EXPIRED:
            assert isinstance(grant, LeaseTakenOver)
            assert grant.previous_owner == before.owner
        else:
            assert isinstance(grant, LeaseAcquired)
        conn = self.states[cid]
        self._learns((worker, cid), Belief(conn.token, conn.expires_at_ms, conn.checkpoint_seq))
        return (worker, cid)

    @rule(grant=grants, lease=lease_ms, step=progress)
    def renew(self, grant: tuple[str, str], lease: int, step: int) -> None:
        """Any worker that was granted this connection once, holding it still or not."""
        self._renew(grant, lease, step)

    @rule(cid=connections, lease=lease_ms, step=progress)
    def holder_heartbeats(self, cid: str, lease: int, step: int) -> None:
        """The common case: whoever believes it holds the lease renews it in time."""
        for (worker, c), belief in list(self.beliefs.items()):
            if c == cid and belief.expires_at_ms >= self.now:
                self._renew((worker, c), lease, step)

    def _renew(self, grant: tuple[str, str], lease: int, step: int) -> None:
        (worker, cid), before = grant, self.states[grant[1]]
        token, seq = self._memory(grant, step)
        outcome = self._execute(Renew(cid, worker, token, lease, seq))
        held = before.is_held_by(worker, token, self.now)
        assert isinstance(outcome, list) == (held and seq >= before.checkpoint_seq)
        if isinstance(outcome, list):
            after = self.states[cid]
            assert after.expires_at_ms == max(before.expires_at_ms, self.now + lease)
            self._learns(grant, Belief(token, after.expires_at_ms, seq))
        elif not held:
            self._learns(grant, None)  # the worker learns it lost the lease

    def _give_back(self, grant: tuple[str, str], command: Command, token: int, seq: int) -> bool:
        """Release-like commands: allowed to the recorded owner and token, even if expired."""
        before = self.states[grant[1]]
        outcome = self._execute(command)
        owns = (before.owner, before.token) == (grant[0], token)
        assert isinstance(outcome, list) == (owns and seq >= before.checkpoint_seq)
        if isinstance(outcome, list):
            assert self.states[grant[1]].lease_status(self.now) is LeaseStatus.RELEASED
        if isinstance(outcome, list) or not owns:
            self._learns(grant, None)
        return isinstance(outcome, list)

    @rule(grant=grants, step=progress)
    def release(self, grant: tuple[str, str], step: int) -> None:
        token, seq = self._memory(grant, step)
        self._give_back(grant, Release(grant[1], grant[0], token, seq), token, seq)

    @rule(grant=grants, step=progress)
    def end_stream(self, grant: tuple[str, str], step: int) -> None:
        token, seq = self._memory(grant, step)
        if self._give_back(grant, EndStream(grant[1], grant[0], token, seq), token, seq):
            assert self.states[grant[1]].desired_state is DesiredState.STOPPED

    @rule(grant=grants, step=progress, back_off=st.integers(0, 5_000))
    def report_upstream_failure(self, grant: tuple[str, str], step: int, back_off: int) -> None:
        token, seq = self._memory(grant, step)
        (worker, cid), not_before = grant, self.now + back_off
        before = self.states[cid]
        command = ReportUpstreamFailure(cid, worker, token, seq, not_before, "refused")
        if self._give_back(grant, command, token, seq):
            after = self.states[cid]
            assert after.not_before_ms == not_before
            progressed = seq > before.checkpoint_seq
            assert after.failures == (1 if progressed else before.failures + 1)

    # -- after every step -----------------------------------------------------------------

    @invariant()
    def at_most_one_worker_holds_each_connection(self) -> None:
        for cid, conn in self.states.items():
            believers = [
                (worker, belief)
                for (worker, c), belief in self.beliefs.items()
                if c == cid and belief.expires_at_ms >= self.now
            ]
            assert len(believers) <= 1, f"{cid}: {believers} all believe they hold it"
            held = [
                w
                for (w, c), b in self.beliefs.items()
                if c == cid and conn.is_held_by(w, b.token, self.now)
            ]
            assert len(held) <= 1
            for worker, belief in believers:  # the store agrees with the one who believes
                assert conn.is_held_by(worker, belief.token, self.now)
                assert conn.expires_at_ms == belief.expires_at_ms
            if conn.lease_status(self.now) is LeaseStatus.HELD:  # and vice versa
                assert [w for w, _ in believers] == [conn.owner]

    @invariant()
    def tokens_rise_with_every_grant_and_are_never_reused(self) -> None:
        for cid, granted in self.granted_tokens.items():
            assert granted == sorted(set(granted))
            if cid in self.states:
                assert self.states[cid].token == (granted[-1] if granted else 0)

    @invariant()
    def checkpoint_is_the_highest_recorded(self) -> None:
        for cid, conn in self.states.items():
            seqs = [e.seq for e in self.histories[cid] if isinstance(e, Checkpointed)]
            assert seqs == sorted(set(seqs))
            assert conn.checkpoint_seq == (seqs[-1] if seqs else 0)

    @invariant()
    def state_is_the_fold_of_its_contiguous_history(self) -> None:
        for cid, history in self.histories.items():
            assert [e.version for e in history] == list(range(1, len(history) + 1))
            assert fold(history) == self.states.get(cid)


TestLeasesUnderRandomInterleavings = LeaseFleet.TestCase
TestLeasesUnderRandomInterleavings.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
