"""`wsfleet fleet --workers N`: N worker processes on this host under one supervisor.

The supervisor knows when a worker is gone for certain: it reaped it. So it ends that worker's
sessions at once (application/deaths.py) and hints its connections, and the survivors take them
in about a second instead of a lease. For that it must know each child's worker id: it chooses
a fresh one per child start (`<name>-<8 hex>`, passed as WSFLEET_WORKER_ID), so a restarted
child never reuses the id of the one before it, whose sessions are dead for good.

- A child that exits is restarted after `--restart-delay`, doubled while it keeps dying within a
  minute of its start (up to 30 s): a worker that cannot start does not spin.
- SIGTERM or SIGINT: SIGTERM to every child, wait for their graceful exits (each hands its
  connections over), end whatever sessions are left, exit 0. A child still running after its
  shutdown budget plus a margin is SIGKILLed (its sessions are ended all the same).
- Each child leads a process group of its own (a Ctrl-C in the terminal reaches only the
  supervisor, which then stops them in order) and, on Linux, is killed by the kernel if the
  supervisor dies first: no orphaned worker keeps streaming unsupervised.
- Children write their JSON log lines to the supervisor's stdout and stderr.
"""

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

from application.deaths import WorkerDeaths
from application.errors import ApplicationError
from application.worker_ids import worker_id_for
from entrypoints.cli.backend import command_settings, open_backend
from entrypoints.containers import provide
from entrypoints.logging_setup import bind_globally, setup_logging
from entrypoints.parent_death import dying_with_parent
from entrypoints.settings import PREFIX, Settings

log = logging.getLogger(__name__)

EXIT_OK = 0
MAX_RESTART_DELAY_S = 30.0
STABLE_S = 60.0  # a child that ran this long resets the restart back-off
STOP_MARGIN_S = 5.0  # beyond the worker's own shutdown budget, before SIGKILL


async def fleet(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    settings = command_settings(env, writes=True, needs_queue=True)
    setup_logging(settings.log_level)
    base = args.name or socket.gethostname()
    bind_globally(service=settings.service_name)
    async with open_backend(settings) as container:
        deaths: WorkerDeaths = await provide(container.core.deaths)
        supervisor = Supervisor(args, env, settings, base, deaths)
        return await supervisor.run()


class Supervisor:
    def __init__(
        self,
        args: argparse.Namespace,
        env: Mapping[str, str],
        settings: Settings,
        base: str,
        deaths: WorkerDeaths,
    ) -> None:
        self._workers: int = args.workers
        self._health_port: int = args.health_port
        self._restart_delay_s: float = args.restart_delay
        self._env = {k: v for k, v in env.items() if k != PREFIX + "WORKER_ID"}
        self._stop_grace_s = settings.worker.shutdown_budget_s + STOP_MARGIN_S
        self._base = base
        self._deaths = deaths
        self._stopping = asyncio.Event()
        self._children: dict[int, asyncio.subprocess.Process] = {}  # slot -> running child

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for signum in signals:
            loop.add_signal_handler(signum, self._stop)
        log.info("fleet supervising %d workers", self._workers)
        try:
            async with asyncio.TaskGroup() as group:
                for slot in range(self._workers):
                    group.create_task(self._keep(slot), name=f"fleet-slot-{slot}")
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
            for child in self._children.values():  # only after a bug: never leave one behind
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
        log.info("fleet stopped")
        return EXIT_OK

    def _stop(self) -> None:
        if self._stopping.is_set():
            return
        log.info("fleet stopping: SIGTERM to every worker")
        self._stopping.set()
        for child in self._children.values():
            _signal(child, signal.SIGTERM)

    async def _keep(self, slot: int) -> None:
        """One slot: start a worker, reap it, report its death, restart it, until stopped."""
        delay = self._restart_delay_s
        while not self._stopping.is_set():
            worker_id = worker_id_for(self._base)  # new for every start
            started = time.monotonic()
            child = await self._spawn(slot, worker_id)
            self._children[slot] = child
            if self._stopping.is_set():  # the stop came while it was being started
                _signal(child, signal.SIGTERM)
            log.info(
                "fleet worker started",
                extra={"slot": slot, "pid": child.pid, "child_worker_id": worker_id},
            )
            code = await self._reap(child)
            del self._children[slot]
            stopping = self._stopping.is_set()
            wait_s = delay
            quick_failure = code != 0 and time.monotonic() - started < STABLE_S
            delay = min(delay * 2, MAX_RESTART_DELAY_S) if quick_failure else self._restart_delay_s
            # Logged as soon as it is reaped (bench/deaths.py times the takeover from here).
            log.log(
                logging.INFO if stopping else logging.WARNING,
                "fleet worker exited (%s)%s",
                _describe(code),
                "" if stopping else f"; restarting in {wait_s:.1f} s",
                extra={"slot": slot, "child_worker_id": worker_id},
            )
            await self._report(worker_id, code)
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._stopping.wait()

    async def _spawn(self, slot: int, worker_id: str) -> asyncio.subprocess.Process:
        env = {**self._env, PREFIX + "WORKER_ID": worker_id}
        env[PREFIX + "HEALTH_PORT"] = str(self._health_port + slot if self._health_port else 0)
        command = dying_with_parent([sys.executable, "-m", "entrypoints.cli", "worker"])
        return await asyncio.create_subprocess_exec(
            *command, env=env, stdin=subprocess.DEVNULL, start_new_session=True
        )

    async def _reap(self, child: asyncio.subprocess.Process) -> int:
        if not self._stopping.is_set():
            waiting = asyncio.ensure_future(child.wait())
            stopping = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if waiting.done():
                return waiting.result()
            waiting.cancel()
        # Stopping: the child got its SIGTERM (in _stop); give it its budget to hand off.
        try:
            async with asyncio.timeout(self._stop_grace_s):
                return await child.wait()
        except TimeoutError:
            log.error("fleet worker overran its shutdown budget: SIGKILL", extra={"pid": child.pid})
            _signal(child, signal.SIGKILL)
            return await child.wait()

    async def _report(self, worker_id: str, code: int) -> None:
        """The child is reaped: it is certainly gone. After a graceful exit its session has
        ended already and this changes nothing."""
        reason = f"worker process exited ({_describe(code)}), reaped by wsfleet fleet"
        try:
            await self._deaths.worker_died(worker_id, reason)
        except ApplicationError as exc:
            log.warning("could not end the dead worker's sessions (they will expire): %s", exc)


def _signal(child: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sig)  # it leads its group: its pid is the group id


def _describe(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"
