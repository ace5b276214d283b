"""Known deaths: end the sessions of a worker that is certainly gone, then hint its connections.

When something knows a worker process is gone (its supervisor reaped it, ECS reported its task
STOPPED), waiting for its session to expire only delays the takeover. This use case ends every
live session of that worker (`EndSession`: its connections are orphans at once) and sends a hint
per connection still owned by any of its dead sessions, so a survivor takes each at once instead
of at its next reconciliation pass.

Only a certain death may be reported: the process is gone, not merely slow. A report about a
live worker is still safe (its next renew is refused, it fences every connection and opens a new
session; tests/integration/test_false_death.py), it only costs that worker its connections.

Idempotent: a session already dead is not written again, and hints for connections that have
new owners already are refused by the store's acquire (a hint is never a guarantee). Repeating
a report re-sends the hints for whatever the dead sessions still own, so a retry after the
queue failed still gets the hints out. Each hint is sent twice (application/hints.py,
SECOND_ROUND_S: without it, bench/deaths.py saw a batch of hints stay invisible for 4 s,
caught by the dead worker's abandoned long poll). Each hint names the dead session that held
it (`HintOrigin`), so that a taker places it by share (application/worker/loops.py).
"""

import logging
from collections.abc import Callable, Sequence

import attrs

from application.aio import gather_all
from application.errors import QueueUnavailable
from application.hints import SECOND_ROUND_S
from application.ports import Clock, ConnectionStore, HintOrigin, NotificationQueue
from application.worker.session_keeper import session_id_of, worker_of
from application.worker_ids import made_from
from domain import InvalidCommand, WorkerSession, validate_session_id

log = logging.getLogger(__name__)

MAX_REASON = 200

_Match = Callable[[WorkerSession], bool]


@attrs.frozen
class DeathOutcome:
    sessions: tuple[str, ...]  # the sessions found for the worker, live or dead
    ended: tuple[str, ...]  # those this call ended (the rest were dead already)
    hinted: tuple[str, ...]  # connections hinted (still owned by a dead session)
    hints_failed: bool = False  # the queue did not answer: reconciliation will find them


class WorkerDeaths:
    def __init__(self, store: ConnectionStore, queue: NotificationQueue, clock: Clock) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock

    async def worker_died(self, worker_id: str, reason: str) -> DeathOutcome:
        """The process with this worker id is gone: end each of its live sessions (every
        incarnation `<worker_id>#<n>`). Raises InvalidCommand, StoreUnavailable."""
        _check_name("worker id", worker_id)
        return await self._end(
            lambda s: worker_of(s.session_id) == worker_id, reason, f"worker {worker_id}"
        )

    async def task_died(self, task_id: str, reason: str) -> DeathOutcome:
        """The ECS task is gone: end the sessions of every worker id based on its task id
        (`<task id>-<8 hex>`, one per container start). Raises InvalidCommand, StoreUnavailable."""
        _check_name("task id", task_id)

        def of_task(session: WorkerSession) -> bool:
            return made_from(worker_of(session.session_id), task_id)

        return await self._end(of_task, reason, f"task {task_id}")

    async def session_died(self, session_id: str, reason: str) -> DeathOutcome:
        """End one session. Raises InvalidCommand, StoreUnavailable."""
        validate_session_id(session_id)
        return await self._end(lambda s: s.session_id == session_id, reason, session_id)

    async def _end(self, matches: _Match, reason: str, subject: str) -> DeathOutcome:
        reason = reason[:MAX_REASON] or "worker died"
        sessions = [s for s in await self._store.list_sessions() if matches(s)]
        ended: list[str] = []
        for session in sessions:
            # A dead session is left alone: its first reason stands and nothing is written.
            if session.is_live(self._clock.now_ms()) and await self._store.end_session(
                session.session_id, reason, self._clock.now_ms()
            ):
                ended.append(session.session_id)
        # One read per session, side by side (a worker restarted often has several).
        found = await gather_all(*(self._store.owned_by(s.session_id) for s in sessions))
        owned = [cid for cids in found for cid in cids]
        # Each session's hints name it: a taker places a dead session's connections by share,
        # as its orphan scan does, instead of taking whatever it receives up to its capacity
        # (the simulation's reported AZ loss moved 8 of 60 connections twice).
        by_session = [
            (cids, HintOrigin(s.session_id))
            for s, cids in zip(sessions, found, strict=True)
            if cids
        ]
        failed = False
        if owned:
            try:
                await self._send(by_session)
                await self._clock.sleep(SECOND_ROUND_S)
                await self._send(by_session)
            except QueueUnavailable as exc:
                failed = True
                log.warning(
                    "hints for a dead worker's connections not sent (reconciliation will "
                    "find them): %s",
                    exc,
                )
        outcome = DeathOutcome(
            tuple(s.session_id for s in sessions), tuple(ended), tuple(owned), failed
        )
        log.info(
            "%s reported dead (%s): %d sessions, %d ended now, %d connections hinted",
            subject,
            reason,
            len(outcome.sessions),
            len(outcome.ended),
            0 if failed else len(owned),
            extra={"ended_sessions": list(outcome.ended)},
        )
        return outcome

    async def _send(self, by_session: Sequence[tuple[Sequence[str], HintOrigin]]) -> None:
        await gather_all(*(self._queue.send(cids, origin=origin) for cids, origin in by_session))


def _check_name(what: str, value: str) -> None:
    # A worker id is also the readable part of its session ids: whatever a session id may hold.
    if not value:
        raise InvalidCommand(f"invalid {what}: empty")
    try:
        validate_session_id(session_id_of(value, 1))
    except InvalidCommand:
        raise InvalidCommand(f"invalid {what} {value[:64]!r}: 1-250 printable characters") from None
