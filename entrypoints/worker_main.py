"""The worker process: `python -m entrypoints.worker` (the ECS task's and the image's command),
on every backend whose registry entry says `image_worker` (entrypoints/backends.py: aws,
postgres); the embedded one runs under `wsfleet worker`, which prepares its data directory.

Exit codes: 0 after a graceful shutdown; 2 for invalid configuration (one line per problem on
stderr, naming the variable and what it allows; no stack trace), a worker id another live
worker runs under included; 1 if the worker crashed, or its backend did not answer at start;
128 + N after an exit forced by signal N (SIGQUIT, or a deliberate second SIGINT: see
entrypoints/worker/signals.py); 70 if the graceful shutdown overran its budget.
"""

import asyncio
import logging
import os
import sys
from collections.abc import Mapping

from application.errors import ApplicationError, ConfigurationError
from application.worker.worker import Worker
from entrypoints.backends import BACKENDS, backend_of, new_container
from entrypoints.chaos import chaos_faults
from entrypoints.containers import provide, shutdown
from entrypoints.logging_setup import bind_globally, setup_logging
from entrypoints.settings import Settings, load_settings
from entrypoints.worker.gc_tuning import tune_gc
from entrypoints.worker.health import HealthServer, Scrape
from entrypoints.worker.identity import new_worker_id
from entrypoints.worker.signals import ShutdownSignals

log = logging.getLogger("entrypoints.worker")

EXIT_OK = 0
EXIT_CRASHED = 1
EXIT_CONFIGURATION = 2


def main(environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    try:
        settings = load_settings(env)
        if not backend_of(settings.backend).image_worker:
            runs = ", ".join(b.name for b in BACKENDS.values() if b.image_worker)
            raise ConfigurationError(
                f"WSFLEET_BACKEND={settings.backend}: this command runs the {runs} workers; run "
                f"the {settings.backend} backend with `wsfleet worker`"
            )
    except ConfigurationError as exc:
        print(f"wsfleet worker: {exc}", file=sys.stderr)
        return EXIT_CONFIGURATION
    setup_logging(settings.log_level)
    try:
        return asyncio.run(run(settings, env))
    except ConfigurationError as exc:  # found while opening adapters (a sink that won't load)
        print(f"wsfleet worker: {exc}", file=sys.stderr)
        return EXIT_CONFIGURATION
    except ApplicationError as exc:  # the backend did not answer at start (a database down)
        print(f"wsfleet worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_CRASHED


async def run(settings: Settings, environ: Mapping[str, str]) -> int:
    worker_id = settings.worker_id or await new_worker_id(environ)
    bind_globally(service=settings.service_name, worker_id=worker_id)
    container = new_container(settings)
    try:
        async with chaos_faults(container, settings):  # nothing unless WSFLEET_CHAOS_CONTROL
            worker: Worker = await provide(container.core.worker, worker_id=worker_id)
            return await serve(worker, settings, container.prometheus().scrape)
    finally:
        await shutdown(container)


async def serve(worker: Worker, settings: Settings, scrape: Scrape | None = None) -> int:
    """Run `worker` with its health endpoint (and `/metrics` there, given `scrape`) until a
    signal and the graceful shutdown end it. Shared by every backend's worker command."""
    health = None
    if settings.health_port:
        health = HealthServer(
            worker, settings.health_host, settings.health_port, settings.service_name, scrape
        )
        try:
            await health.start()
        except OSError as exc:  # taken, or not an address of this host
            raise ConfigurationError(
                f"WSFLEET_HEALTH_PORT={settings.health_port}: cannot listen on "
                f"{settings.health_host}:{settings.health_port}: {exc.strerror or exc}"
            ) from exc
    tune_gc(settings.gc_thresholds)
    signals = ShutdownSignals(worker.request_shutdown, settings.worker.shutdown_budget_s)
    signals.install()
    log.info(
        "worker %s running (lease %d ms, up to %d connections)",
        worker.worker_id,
        settings.worker.lease_ms,
        settings.worker.max_connections,
    )
    try:
        await worker.run()
    except ConfigurationError:
        raise  # found at start (a worker id in use): exit 2 with its message, as for settings
    except Exception:
        log.exception("worker crashed")
        return EXIT_CRASHED
    finally:
        await signals.uninstall()
        if health is not None:
            await health.close()
    log.info("worker %s stopped", worker.worker_id)
    return EXIT_OK
