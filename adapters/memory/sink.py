"""InMemoryMessageSink: messages keyed by (connection, seq), so a rewrite is an overwrite of
the same message, never a second copy. Counts rewrites and can fail on purpose."""

from collections.abc import Sequence

from application.errors import ConfigurationError, SinkUnavailable
from application.ports.sink import StoredMessage


class InMemoryMessageSink:
    def __init__(self, max_batch: int = 25) -> None:
        if max_batch < 1:
            raise ConfigurationError(f"max_batch must be at least 1, got {max_batch}")
        self.max_batch = max_batch
        self.messages: dict[tuple[str, int], StoredMessage] = {}
        self.writes = 0  # batches written
        self.written = 0  # messages written, rewrites included
        self.rewrites = 0  # messages whose (connection, seq) was already stored
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
        for message in messages:
            key = (message.connection_id, message.seq)
            if key in self.messages:
                self.rewrites += 1
            self.messages[key] = message
            self.written += 1

    def seqs(self, connection_id: str) -> list[int]:
        return sorted(seq for cid, seq in self.messages if cid == connection_id)
