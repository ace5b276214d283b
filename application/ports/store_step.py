"""The template of a store's command, written once: read, decide, fold, write with the logged
events. A store that holds state subclasses `SteppedStore` and writes only its primitives:

- `_atomically(command, run)`: run `run` once as one atomic step (a transaction with row locks,
  a lock, or a conditional write retried on a lost race), handing it a `StoreStep`;
- the `StoreStep`: load what the domain decides on, and save a decided change together with
  its logged events, each inside that step.

The rules the template holds for every store: the domain decides (`decide`, `decide_session`)
and the new state is the fold of its events; nothing is written when nothing changed; only the
ownership events (`is_ownership_event`) and SessionOpened / SessionEnded / SessionExpired go to
the logs; and a session id is never opened twice, even after its row was forgotten (its logged
SessionOpened is what the open is judged against). cosmicpython's repository and unit of work
have this shape: public operations above, one small primitive per store below.
"""

import abc
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from application.ports.store import CommandResult, ConnectionStore, SessionResult
from domain import (
    NO_OWNER,
    SESSION_LOG_EVENTS,
    Acquire,
    Command,
    Connection,
    Event,
    OpenSession,
    SessionCommand,
    SessionEvent,
    WorkerSession,
    decide,
    decide_session,
    fold,
    fold_session,
    is_ownership_event,
)

T = TypeVar("T")


@attrs.frozen
class Change:
    """A connection command's decided change: `before` (None: it creates the connection) becomes
    `after`; `logged` are the events for the ownership log, in order."""

    command: Command
    now_ms: int
    before: Connection | None
    after: Connection
    events: tuple[Event, ...]

    @property
    def logged(self) -> tuple[Event, ...]:
        return tuple(e for e in self.events if is_ownership_event(e))


@attrs.frozen
class SessionChange:
    """A session command's decided change; `before` is None when it creates the session item."""

    command: SessionCommand
    now_ms: int
    before: WorkerSession | None
    after: WorkerSession
    events: tuple[SessionEvent, ...]

    @property
    def logged(self) -> tuple[SessionEvent, ...]:
        return tuple(e for e in self.events if isinstance(e, SESSION_LOG_EVENTS))


def consulted_sessions(command: Command, state: Connection | None) -> frozenset[str]:
    """The sessions `decide` consults: for an Acquire, the acquirer's and the owner's (a store
    leaves a missing one out: the domain reads it as dead); no other command reads any."""
    if not isinstance(command, Acquire):
        return frozenset()
    owner = () if state is None or state.owner == NO_OWNER else (state.owner,)
    return frozenset((command.session_id, *owner))


class StoreStep(abc.ABC):
    """A store's primitives, valid inside one `_atomically` step. A load may be answered from
    what a lost race returned (DynamoDB); a save raises the domain's error or StoreUnavailable,
    or whatever the store's `_atomically` catches to run the step again."""

    @abc.abstractmethod
    async def load(self, command: Command) -> tuple[Connection | None, Mapping[str, WorkerSession]]:
        """The connection and the `consulted_sessions` that exist."""

    @abc.abstractmethod
    async def save(self, change: Change) -> None:
        """Write `change.after` in place of `change.before` and append `change.logged`."""

    @abc.abstractmethod
    async def load_session(self, command: SessionCommand) -> WorkerSession | None:
        """The session item, or None (never opened, or forgotten)."""

    @abc.abstractmethod
    async def opened(self, session_id: str) -> Sequence[SessionEvent]:
        """The session's logged SessionOpened (empty if it never opened): its log outlives its
        item, and an id is judged against it when the item is gone."""

    @abc.abstractmethod
    async def save_session(self, change: SessionChange) -> None:
        """Write `change.after` in place of `change.before` and append `change.logged`."""


async def run_command(step: StoreStep, command: Command, now_ms: int) -> CommandResult:
    state, sessions = await step.load(command)
    events = decide(state, command, now_ms, sessions)  # refusals propagate: nothing written
    if not events:
        if state is None:  # decide never returns no events for an unknown connection
            raise AssertionError("no events for an unknown connection")
        return CommandResult(state, False)
    new_state = fold(events, state)
    assert new_state is not None
    await step.save(Change(command, now_ms, state, new_state, tuple(events)))
    return CommandResult(new_state, True, tuple(events))


async def run_session_command(
    step: StoreStep, command: SessionCommand, now_ms: int
) -> SessionResult:
    state = await step.load_session(command)
    if state is None and isinstance(command, OpenSession):
        # A forgotten session's item is gone but its log is not: an id is never opened twice
        # (the port's promise), so the domain judges the open against its SessionOpened.
        state = fold_session(await step.opened(command.session_id))
    events = decide_session(state, command, now_ms)
    if not events:
        assert state is not None  # an EndSession of an ended session; unknown ones raise
        return SessionResult(state, False)
    new_state = fold_session(events, state)
    assert new_state is not None
    await step.save_session(SessionChange(command, now_ms, state, new_state, tuple(events)))
    return SessionResult(new_state, True)


class SteppedStore(ConnectionStore):
    """The base of every store that holds the state itself (the decorators in adapters/faults
    and bench/sim wrap a store and subclass ConnectionStore instead)."""

    @abc.abstractmethod
    async def _atomically(
        self, command: Command | SessionCommand, run: Callable[[StoreStep], Coroutine[Any, Any, T]]
    ) -> T:
        """Run `run` as one atomic step of this store (again, whole, after a lost race) and
        return what it returns; `command` names the step for accounting and errors."""

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        return await self._atomically(command, lambda step: run_command(step, command, now_ms))

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        return await self._atomically(
            command, lambda step: run_session_command(step, command, now_ms)
        )
