"""Admission: which messages of one upstream stream go to the sink, at which seq (sans-I/O).

The rules an upstream's messages are judged by, kept apart from the session's loops so that
they are decided in one place and tested without sockets or an event loop. `Admission` holds
one session's view of its stream; `receive` turns each message into a `Verdict` (what to
store, what was a replay, what the upstream skipped, or the fault that ends the connection).

The policy (docs/decisions.md, "What an upstream may send"), for a stream that numbers its
messages:

- the next seq is stored;
- a seq further ahead (a gap, within `seq_jump_window`) is held until the next message: a seq
  after it confirms the gap (the seqs in between are counted lost upstream), a seq inside the
  gap shows that the jump was not the stream's (a fault: nothing past the gap was stored, so
  the next owner asks for the gap again);
- a seq already received in this session (one of the last `RECENT`) is compared: the same
  data is a replay and dropped, other data a fault;
- a seq the stream skipped, arriving late, is a fault (it cannot be stored behind the seqs
  after it);
- an older seq (at or below where the session resumed, or received longer ago than `RECENT`
  seqs) is a replay of what is stored, dropped without comparing (it would cost a sink read);
- a seq out of range, text the sink cannot store, or a jump beyond the window, is a fault.

A stream that numbers nothing is stored in order, each message at the next seq.
"""

import array
import collections

import attrs

from application.ports import UpstreamMessage
from application.ports.metrics import MESSAGES_REJECTED, SEQ_CONFLICTS, SEQ_JUMPS
from application.ports.sink import MAX_SEQ, utf8_size

RECENT = 64  # seqs per session whose data is remembered (as a hash) to compare a replay
_SKIPS_KEPT = 8  # the last gaps of a session, to recognise a skipped seq arriving late


@attrs.frozen
class Fault:
    """The upstream broke the message contract: `reason` is persisted with the back-off,
    `counter` is the metric it counts in."""

    reason: str
    counter: str


@attrs.frozen
class Verdict:
    """What one message (or the stream's end) asks of the session, in this order: count
    `skipped` (first..last seqs the upstream will never send), store `accept`, count a
    `replay`, give the connection up for `fault`."""

    accept: tuple[tuple[int, str], ...] = ()
    skipped: tuple[int, int] | None = None
    replay: bool = False
    fault: Fault | None = None


_REPLAY = Verdict(replay=True)
_NOTHING = Verdict()


@attrs.frozen
class AdmissionPolicy:
    seq_jump_window: int
    max_message_bytes: int


class Admission:
    def __init__(self, resume_checkpoint: int, policy: AdmissionPolicy) -> None:
        """`resume_checkpoint` is the last seq stored before this session: the stream is asked
        for messages after it."""
        self._policy = policy
        self._resumed = resume_checkpoint > 0
        self.next_seq = resume_checkpoint + 1  # the next seq passed on for storing
        # Whether the upstream numbers its messages: None until its first message says. A
        # resumed stream's first message without a seq says nothing yet: held for the next.
        self._sequenced: bool | None = None
        self._unnumbered: UpstreamMessage | None = None
        self._ahead: tuple[int, str] | None = None  # the message after a gap, unconfirmed
        # Made on the first sequenced message: quiet sessions and unnumbered streams pay nothing.
        self._recent_seqs: array.array[int] | None = None
        self._recent_hashes: array.array[int] = array.array("q")
        self._skips: collections.deque[tuple[int, int]] = collections.deque(maxlen=_SKIPS_KEPT)

    @property
    def holding_unnumbered(self) -> bool:
        """A resumed stream's first message, without a seq, still waits for the next one."""
        return self._unnumbered is not None

    @property
    def holding_ahead(self) -> int | None:
        """The seq of a message after a gap that no later message has confirmed yet."""
        return None if self._ahead is None else self._ahead[0]

    def receive(self, message: UpstreamMessage) -> Verdict:
        held, self._unnumbered = self._unnumbered, None
        if held is not None:
            if message.seq is not None:
                reason = "a message without a seq in a sequenced stream (resumed)"
                return Verdict(fault=_rejected(reason))
            self._sequenced = False
            first = self._numbered(held)
            if first.fault is not None:
                return first
            second = self._numbered(message)
            return second if second.fault is not None else _joined(first, second)
        if message.seq is None:
            if self._sequenced:
                return Verdict(fault=_rejected("a message without a seq in a sequenced stream"))
            if self._sequenced is None and self._resumed:
                self._unnumbered = message
                return _NOTHING
            self._sequenced = False
            return self._numbered(message)
        if self._sequenced is None:
            self._sequenced = True
        return self._sequenced_message(message.seq, message.data)

    def stream_ended(self) -> Verdict:
        """The upstream finished normally: what is still held is stored (no later message
        will confirm it, and none will contradict it)."""
        if self._unnumbered is not None:
            message, self._unnumbered = self._unnumbered, None
            return self._numbered(message)
        if self._ahead is not None:
            return self._confirm_ahead()
        return _NOTHING

    def reconnecting(self) -> None:
        """The stream dropped: an unconfirmed message after a gap is forgotten (the stream is
        asked again from `next_seq`, which it comes after)."""
        self._ahead = None

    def _numbered(self, message: UpstreamMessage) -> Verdict:
        seq = self.next_seq
        fault = self._check_data(seq, message.data)
        if fault is not None:
            return Verdict(fault=fault)
        self.next_seq = seq + 1
        return Verdict(accept=((seq, message.data),))

    def _sequenced_message(self, seq: int, data: str) -> Verdict:
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
            return Verdict(fault=_rejected(f"seq {seq!r:.40} is not an integer in 0..2^63-1"))
        fault = self._check_data(seq, data)
        if fault is not None:
            return Verdict(fault=fault)
        ahead = self._ahead
        frontier = self.next_seq if ahead is None else ahead[0] + 1
        if seq - frontier > self._policy.seq_jump_window:
            # Not followed: everything normal after it would be dropped as a replay.
            return Verdict(
                fault=Fault(
                    f"seq jumped from {frontier - 1} to {seq}, more than "
                    f"{self._policy.seq_jump_window} ahead",
                    SEQ_JUMPS,
                )
            )
        if ahead is not None:
            if seq > ahead[0]:
                return _joined(self._confirm_ahead(), self._plain(seq, data))
            if seq == ahead[0]:
                if data == ahead[1]:
                    return _REPLAY
                return Verdict(fault=_conflict(seq))
            if seq >= self.next_seq:
                self._ahead = None
                return Verdict(
                    fault=Fault(
                        f"seq {seq} after the stream jumped from {self.next_seq - 1} to "
                        f"{ahead[0]}: the jump is not followed",
                        SEQ_JUMPS,
                    )
                )
        return self._plain(seq, data)

    def _plain(self, seq: int, data: str) -> Verdict:
        """`seq` with nothing held ahead of it (or behind what is)."""
        if seq == self.next_seq:
            self.next_seq = seq + 1
            self._remember(seq, data)
            return Verdict(accept=((seq, data),))
        if seq > self.next_seq:
            self._ahead = (seq, data)
            return _NOTHING
        return self._backward(seq, data)

    def _confirm_ahead(self) -> Verdict:
        """The message after a gap is the stream's: store it, count the gap as lost."""
        ahead, self._ahead = self._ahead, None
        assert ahead is not None
        seq, data = ahead
        skipped = (self.next_seq, seq - 1)
        self._skips.append(skipped)
        self.next_seq = seq + 1
        self._remember(seq, data)
        return Verdict(accept=((seq, data),), skipped=skipped)

    def _backward(self, seq: int, data: str) -> Verdict:
        for first, last in self._skips:
            if first <= seq <= last:
                return Verdict(
                    fault=Fault(
                        f"seq {seq} arrived after the stream had skipped seqs {first}..{last} "
                        "(counted lost upstream)",
                        SEQ_JUMPS,
                    )
                )
        recent = self._recent_seqs
        slot = seq % RECENT
        if recent is not None and recent[slot] == seq:
            if self._recent_hashes[slot] == hash(data):
                return _REPLAY
            return Verdict(fault=_conflict(seq))
        return _REPLAY

    def _remember(self, seq: int, data: str) -> None:
        recent = self._recent_seqs
        if recent is None:
            recent = self._recent_seqs = array.array("q", [-1]) * RECENT
            self._recent_hashes = array.array("q", [0]) * RECENT
        slot = seq % RECENT
        recent[slot] = seq
        self._recent_hashes[slot] = hash(data)

    def _check_data(self, seq: int, data: str) -> Fault | None:
        """What the sink cannot store is the upstream's fault, found before the shared writer."""
        try:
            size = utf8_size(data)
        except UnicodeEncodeError:  # a lone surrogate, from a JSON escape such as \ud800
            return _rejected(f"seq {seq}: data is not valid Unicode text")
        if size > self._policy.max_message_bytes:
            return _rejected(
                f"seq {seq}: {size} bytes, more than the sink stores "
                f"({self._policy.max_message_bytes})"
            )
        return None


def _rejected(reason: str) -> Fault:
    return Fault(reason, MESSAGES_REJECTED)


def _conflict(seq: int) -> Fault:
    return Fault(f"seq {seq} sent again with other data than this session received", SEQ_CONFLICTS)


def _joined(first: Verdict, then: Verdict) -> Verdict:
    """Two verdicts of one message (neither a fault): `first`'s skip is the only one."""
    return Verdict(accept=first.accept + then.accept, skipped=first.skipped or then.skipped)
