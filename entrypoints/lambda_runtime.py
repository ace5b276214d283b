"""What each of wsfleet's Lambda functions (the router, the deaths handler) keeps between
invocations in one Lambda container.

Clients are created once per container, on the first invocation (never at import), and reused
by every later one. aioboto3 clients are bound to the event loop that opened them, so the
container keeps ONE event loop for its lifetime and runs each invocation on it with
`run_until_complete`: `asyncio.run` per invocation would close the loop every time and force new
clients (TLS handshakes, credential look-ups) on every request. Lambda runs one invocation at a
time per container, so the loop is never re-entered.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.logging_setup import bind_globally, setup_logging
from entrypoints.settings import Settings

T = TypeVar("T")
R = TypeVar("R")


class AwsRuntime:
    """One event loop and one AwsContainer, with the process's logging set up."""

    def __init__(self, settings: Settings) -> None:
        setup_logging(settings.log_level)
        bind_globally(service=settings.service_name)
        self.loop = asyncio.new_event_loop()
        self.container = AwsContainer(settings=settings)

    def run(self, awaitable: Awaitable[T]) -> T:
        return self.loop.run_until_complete(awaitable)

    def provide(self, provider: Any) -> Any:
        """A provider's object, built on the loop; a failure closes what was opened."""
        try:
            return self.run(provide(provider))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.loop.run_until_complete(shutdown(self.container))
        finally:
            self.loop.close()


class PerContainer(Generic[R]):
    """A handler module's state: built on the first invocation, kept for the next ones."""

    def __init__(self, build: Callable[[], R], close: Callable[[R], None]) -> None:
        self._build = build
        self._close = close
        self._value: R | None = None

    def get(self) -> R:
        if self._value is None:
            self._value = self._build()
        return self._value

    def close(self) -> None:
        """Close the clients and the loop (tests; a Lambda container is simply discarded)."""
        if self._value is not None:
            value, self._value = self._value, None
            self._close(value)
