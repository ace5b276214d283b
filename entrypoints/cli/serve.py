"""The long-running commands: `wsfleet worker` and `wsfleet api`, on any backend.

Both log JSON lines to stdout (like the ECS worker and the Lambda) and stop on SIGINT or
SIGTERM. The worker is served by the same `serve` as the ECS task (health endpoint, graceful
shutdown with handoff, watchdog, exit codes: see entrypoints/worker_main.py).
"""

import argparse
import asyncio
import signal
from collections.abc import Mapping

from application.errors import ConfigurationError
from application.worker.worker import Worker
from application.worker_ids import worker_id_for
from entrypoints.api import EventApi
from entrypoints.chaos import chaos_faults
from entrypoints.cli.api_perimeter import ApiPerimeter, require_token_off_loopback
from entrypoints.cli.api_server import LocalApiServer
from entrypoints.cli.backend import command_settings, open_backend
from entrypoints.containers import provide
from entrypoints.logging_setup import bind_globally, setup_logging
from entrypoints.settings import PREFIX
from entrypoints.worker.identity import new_worker_id
from entrypoints.worker_main import serve

EXIT_OK = 0


async def worker(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    env = dict(env)
    if args.health_port is not None:
        env[PREFIX + "HEALTH_PORT"] = str(args.health_port)
    settings = command_settings(env, writes=True, needs_queue=True)
    setup_logging(settings.log_level)
    # Unique per incarnation either way: a restarted worker never renews its predecessor's lease
    # (a WSFLEET_WORKER_ID is chosen anew per start by its supervisor: `wsfleet fleet`).
    if settings.worker_id:
        worker_id = settings.worker_id
    else:
        worker_id = worker_id_for(args.name) if args.name else await new_worker_id(env)
    bind_globally(service=settings.service_name, worker_id=worker_id)
    async with open_backend(settings) as container, chaos_faults(container, settings):
        the_worker: Worker = await provide(container.core.worker, worker_id=worker_id)
        # A taken health port is a ConfigurationError naming WSFLEET_HEALTH_PORT (exit 2): on
        # one host, give each worker its own (--health-port), or 0 to turn it off.
        return await serve(the_worker, settings, container.prometheus().scrape)


async def api(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    env = dict(env)
    if args.host is not None:
        env[PREFIX + "API_HOST"] = args.host
    if args.port is not None:
        env[PREFIX + "API_PORT"] = str(args.port)
    settings = command_settings(env, writes=True, needs_queue=True)
    require_token_off_loopback(settings.api_host, settings.api_token)
    setup_logging(settings.log_level)
    bind_globally(service=settings.service_name)
    async with open_backend(settings) as container:
        event_api: EventApi = await provide(container.core.api)
        perimeter = ApiPerimeter.of(
            settings.api_host, settings.api_allowed_hosts, settings.api_token
        )
        server = LocalApiServer(
            event_api,
            settings.api_host,
            settings.api_port,
            perimeter,
            settings.api_max_connections,
        )
        try:
            await server.start()
        except OSError as exc:
            raise ConfigurationError(
                f"cannot listen on {settings.api_host}:{settings.api_port}: "
                f"{exc.strerror or exc}; choose another WSFLEET_API_PORT (or --port)"
            ) from exc
        try:
            # One parseable line, so a parent process can learn the port chosen with --port 0.
            print(f"wsfleet api listening on {server.url} ({settings.backend})", flush=True)
            await _until_signalled()
        finally:
            await server.close()
    return EXIT_OK


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
