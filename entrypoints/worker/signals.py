"""SIGTERM/SIGINT/SIGQUIT handling for the worker process.

The first SIGTERM or SIGINT asks the worker to shut down gracefully (release every lease with
its final checkpoint and hint the fleet) and arms a watchdog: if the shutdown overruns its
budget by more than a grace period, the process exits anyway, before ECS's SIGKILL would.

Only a deliberate request cuts the handoff short: SIGQUIT (Ctrl-\\) at any time, or a SIGINT
(Ctrl-C) at least `DELIBERATE_AFTER_S` after the shutdown began. A repeated SIGTERM never
does, nor does a SIGINT right after the first signal: supervisors, container runtimes and
`timeout` deliver a signal to the process and to its group, so one stop often arrives twice
within a millisecond, and exiting on it would leave every connection to expire. Ignored
signals are logged once each. A forced exit is non-zero (128 + signal number, or 70 for the
watchdog), so an orchestrator can tell a forced stop from a clean one."""

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
WATCHDOG_EXIT_CODE = 70  # EX_SOFTWARE: the graceful shutdown did not finish in time
WATCHDOG_GRACE_S = 5.0
# A second Ctrl-C sooner than this is taken for the same stop delivered twice (the terminal
# signals the whole group, and a wrapper may forward it again); a person pressing again to
# insist takes longer than that.
DELIBERATE_AFTER_S = 1.0


class ShutdownSignals:
    def __init__(
        self,
        request_shutdown: Callable[[], None],
        budget_s: float,
        exit_now: Callable[[int], None] = os._exit,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._request_shutdown = request_shutdown
        self._budget_s = budget_s
        self._exit_now = exit_now
        self._monotonic = monotonic
        self._began_at: float | None = None  # when the graceful shutdown was requested
        self._ignored: set[signal.Signals] = set()  # logged once each
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
        if sig is signal.SIGQUIT:
            log.error("SIGQUIT: exiting at once, without the graceful shutdown")
            self._force(128 + sig.value)
            return
        now = self._monotonic()
        if self._began_at is None:
            self._began_at = now
            log.info("%s received: graceful shutdown within %.1fs", sig.name, self._budget_s)
            self._request_shutdown()
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
            return
        if sig is signal.SIGINT and now - self._began_at >= DELIBERATE_AFTER_S:
            log.error("second SIGINT: exiting without finishing the shutdown")
            self._force(128 + sig.value)
            return
        if sig not in self._ignored:
            self._ignored.add(sig)
            log.warning(
                "%s ignored: the graceful shutdown is already under way (a second Ctrl-C "
                "after %.0fs, or SIGQUIT, cuts it short)",
                sig.name,
                DELIBERATE_AFTER_S,
            )

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
