"""The event router use case: START/STOP from the outside world into the store, then a hint.

Shared by the Lambda handler and the local API, so validation and outcomes live in one place.
The store write happens first: a hint for a connection the store does not know would be useless,
and a lost hint only delays pickup until the next reconciliation.
"""

import logging
from collections.abc import Sequence

import attrs

from application.errors import QueueUnavailable
from application.hints import send_hints
from application.ports import Clock, ConnectionStore, NotificationQueue
from application.url_policy import UrlPolicy
from domain import NO_OWNER, Connection, Event, SessionEvent, WorkerSession, validate_connection_id

log = logging.getLogger(__name__)


@attrs.frozen
class CommandOutcome:
    connection: Connection
    changed: bool  # False when the command repeated what was already so (idempotent replay)
    # The owner's session, when there is one: whether the lease is held is judged by it.
    sessions: dict[str, WorkerSession] = attrs.field(factory=dict)


class EventRouter:
    def __init__(
        self,
        store: ConnectionStore,
        queue: NotificationQueue,
        clock: Clock,
        url_policy: UrlPolicy,
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._url_policy = url_policy

    async def start(self, connection_id: str, ws_url: str) -> CommandOutcome:
        """Raises InvalidCommand, ForbiddenUrl, ConnectionConflict, StoreUnavailable."""
        validate_connection_id(connection_id)
        await self._url_policy.check(ws_url)
        result = await self._store.start(connection_id, ws_url, self._clock.now_ms())
        if result.changed:
            await self._hint(connection_id)
        sessions = await self.owner_session(result.connection)
        return CommandOutcome(result.connection, result.changed, sessions)

    async def stop(self, connection_id: str) -> CommandOutcome:
        """Raises InvalidCommand, ConnectionNotFound, StoreUnavailable."""
        validate_connection_id(connection_id)
        result = await self._store.stop(connection_id, self._clock.now_ms())
        sessions = await self.owner_session(result.connection)
        return CommandOutcome(result.connection, result.changed, sessions)

    async def get(self, connection_id: str) -> Connection | None:
        validate_connection_id(connection_id)
        return await self._store.get(connection_id)

    async def owner_session(self, conn: Connection) -> dict[str, WorkerSession]:
        """The session that owns `conn` (one read, only when it has an owner), as a lookup
        for `Connection.lease_status`."""
        if conn.owner == NO_OWNER:
            return {}
        session = await self._store.get_session(conn.owner)
        return {} if session is None else {session.session_id: session}

    async def history(self, connection_id: str) -> Sequence[Event]:
        validate_connection_id(connection_id)
        return await self._store.history(connection_id)

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        return await self._store.session_history(session_id)

    async def _hint(self, connection_id: str) -> None:
        try:
            await send_hints(self._queue, [connection_id], {"connection_id": connection_id})
        except QueueUnavailable:
            # The START is durable; reconciliation will find the orphan. Say so, don't fail.
            log.warning(
                "queue unavailable; connection will be picked up by reconciliation",
                extra={"connection_id": connection_id},
            )
