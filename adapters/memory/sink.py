"""InMemoryMessageSink: messages keyed by (connection, seq), so a rewrite is an overwrite of
the same message, never a second copy. Fenced like every sink: a write under an older token
than the stored one, or with other data for a stored seq, is refused (SinkRefused). Counts
rewrites and can fail on purpose. The reference `resume_point`: the port's rule over every
stored message of the connection, in seq order."""

from collections.abc import Sequence

from application.errors import ConfigurationError, SinkRefused, SinkUnavailable
from application.ports.sink import StoredMessage, follow_links, storable


class InMemoryMessageSink:
    def __init__(self, max_batch: int = 25, max_message_bytes: int = 16 * 2**20) -> None:
        if max_batch < 1:
            raise ConfigurationError(f"max_batch must be at least 1, got {max_batch}")
        self.max_batch = max_batch
        self.max_message_bytes = max_message_bytes
        self.messages: dict[tuple[str, int], StoredMessage] = {}
        self.writes = 0  # batches written
        self.written = 0  # messages written, rewrites included
        self.rewrites = 0  # messages whose (connection, seq) was already stored
        # Each rewrite as (connection, seq, stored token, rewriting token): whose write it was.
        self.rewritten: list[tuple[str, int, int, int]] = []
        self._fail_next = 0
        self._fail_partially = False

    def fail_next(self, n: int = 1, *, partially: bool = False) -> None:
        """The next n writes raise SinkUnavailable without storing anything — or, if
        `partially`, after storing the first half of the batch (as a throttled BatchWriteItem
        can leave it)."""
        self._fail_next += n
        self._fail_partially = partially

    def stop_failing(self) -> None:
        """Forget the failures still planned: the sink is healthy again."""
        self._fail_next = 0

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        if self._fail_next:
            self._fail_next -= 1
            if self._fail_partially:
                self._store(messages[: len(messages) // 2])
            raise SinkUnavailable("injected sink failure")
        self._store(messages)
        self.writes += 1

    def _store(self, messages: Sequence[StoredMessage]) -> None:
        stale: set[tuple[str, int]] = set()
        conflicts: set[tuple[str, int]] = set()
        invalid: set[tuple[str, int]] = set()
        for message in messages:
            key = (message.connection_id, message.seq)
            stored = self.messages.get(key)
            if not storable(message, self.max_message_bytes):
                invalid.add(key)
            elif stored is not None and stored.token > message.token:
                stale.add(key)
            elif stored is not None and stored.data != message.data:
                conflicts.add(key)
            else:
                if stored is not None:
                    self.rewrites += 1
                    self.rewritten.append((*key, stored.token, message.token))
                self.messages[key] = message
                self.written += 1
        if stale or conflicts or invalid:
            raise SinkRefused(
                stale=frozenset(stale), conflicts=frozenset(conflicts), invalid=frozenset(invalid)
            )

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int:
        above = (seq for seq in self.seqs(connection_id) if seq > checkpoint_seq)
        links = ((seq, self.messages[(connection_id, seq)].prev_seq) for seq in above)
        return follow_links(checkpoint_seq, links)[0]

    def seqs(self, connection_id: str) -> list[int]:
        return sorted(seq for cid, seq in self.messages if cid == connection_id)
