"""SIGTERM/SIGINT handling for the worker process.

The first signal asks the worker to shut down gracefully (release every lease with its final
checkpoint and hint the fleet) and arms a watchdog: if the shutdown overruns its budget by
more than a grace period, the process exits anyway, before ECS's SIGKILL would. A second
signal exits at once. Either forced exit is non-zero (128 + signal number, or 70 for the
watchdog), so an orchestrator can tell a forced stop from a clean one."""

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)
WATCHDOG_EXIT_CODE = 70  # EX_SOFTWARE: the graceful shutdown did not finish in time
WATCHDOG_GRACE_S = 5.0


class ShutdownSignals:
    def __init__(
        self,
        request_shutdown: Callable[[], None],
        budget_s: float,
        exit_now: Callable[[int], None] = os._exit,
    ) -> None:
        self._request_shutdown = request_shutdown
        self._budget_s = budget_s
        self._exit_now = exit_now
        self._received: list[signal.Signals] = []
        self._watchdog: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        self._loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            self._loop.add_signal_handler(sig, self._on_signal, sig)

    async def uninstall(self) -> None:
        if self._loop is not None:
            for sig in SIGNALS:
                self._loop.remove_signal_handler(sig)
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._received.append(sig)
        if len(self._received) > 1:
            log.error("second signal (%s): exiting without finishing the shutdown", sig.name)
            self._force(128 + sig.value)
            return
        log.info("%s received: graceful shutdown within %.1fs", sig.name, self._budget_s)
        self._request_shutdown()
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        await asyncio.sleep(self._budget_s + WATCHDOG_GRACE_S)
        log.error("graceful shutdown overran its %.1fs budget: exiting", self._budget_s)
        self._force(WATCHDOG_EXIT_CODE)

    def _force(self, code: int) -> None:
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        self._exit_now(code)
