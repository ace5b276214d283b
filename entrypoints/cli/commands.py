"""The operator commands: `start`, `stop`, `status`, `history`.

START and STOP go through the same EventRouter as the Lambda and the local API (validation,
SSRF rules, idempotency, the hint after a START), from the backend's container; `status` and
`history` read the store, from the backend's read side (entrypoints/read_side/: no container,
so they answer without the worker's imports). With
`--json`, each prints the document the HTTP API would answer (the same views), for scripts.
"""

import argparse
import json
from collections.abc import Mapping
from typing import Any

from adapters.system.clock import SystemClock
from application.errors import ConfigurationError
from application.router import CommandOutcome, EventRouter
from application.worker.session_keeper import SESSION_SEPARATOR
from domain import ConnectionNotFound, validate_connection_id
from domain.codec import event_to_dict
from entrypoints.api.views import connection_view, event_view, session_view
from entrypoints.cli import tables
from entrypoints.cli.backend import command_settings, open_backend
from entrypoints.read_side import open_read_side

EXIT_OK = 0


async def start(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from entrypoints.containers import provide  # the composition root: for the writes only

    settings = command_settings(env, writes=True, needs_queue=True)
    async with open_backend(settings) as container:
        router: EventRouter = await provide(container.core.router)
        outcome = await router.start(args.connection_id, args.ws_url)
        _print_outcome(outcome, container.core.clock().now_ms(), args.json)
    return EXIT_OK


async def stop(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from entrypoints.containers import provide

    settings = command_settings(env, writes=False, needs_queue=True)
    async with open_backend(settings) as container:
        router: EventRouter = await provide(container.core.router)
        outcome = await router.stop(args.connection_id)
        _print_outcome(outcome, container.core.clock().now_ms(), args.json)
    return EXIT_OK


# How many connections `status` lists by default; `--watch` aggregates, so it reads more.
STATUS_LIMIT = 1000
WATCH_LIMIT = 100_000


async def status(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if args.watch:
        if args.json:
            raise ConfigurationError("--watch and --json: choose one (--json is a snapshot)")
        from entrypoints.cli.watch import watch  # the live view's imports only when asked

        args.limit = args.limit or WATCH_LIMIT
        return await watch(args, env)
    args.limit = args.limit or STATUS_LIMIT
    settings = command_settings(env, writes=False)
    async with open_read_side(settings) as backend:
        store = await backend.store()
        connections = await store.list_connections(limit=args.limit)
        sessions = await store.list_sessions()
        now_ms = SystemClock().now_ms()
    if args.json:
        lookup = {s.session_id: s for s in sessions}
        views = [connection_view(c, now_ms, lookup) for c in connections]
        _print_json(
            {
                "now_ms": now_ms,
                "sessions": [session_view(s, now_ms) for s in sessions],
                "connections": views,
            }
        )
    else:
        tables.print_status(
            tables.console(),
            connections,
            sessions,
            now_ms,
            limited=len(connections) >= args.limit,
        )
    return EXIT_OK


async def history(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    settings = command_settings(env, writes=False)
    if SESSION_SEPARATOR in args.connection_id:  # never in a connection id
        return await _session_history(args.connection_id, settings, args.json)
    validate_connection_id(args.connection_id)  # as the router's history does
    async with open_read_side(settings) as backend:
        events = await (await backend.store()).history(args.connection_id)
    if not events:
        raise ConnectionNotFound(f"connection {args.connection_id!r} was never started")
    if args.json:
        _print_json(
            {"connection_id": args.connection_id, "events": [event_view(e) for e in events]}
        )
    else:
        tables.print_history(tables.console(), args.connection_id, events)
    return EXIT_OK


async def _session_history(session_id: str, settings: Any, as_json: bool) -> int:
    async with open_read_side(settings) as backend:
        events = await (await backend.store()).session_history(session_id)
    if not events:
        raise ConnectionNotFound(f"worker session {session_id!r} is unknown")
    if as_json:
        _print_json({"session_id": session_id, "events": [event_to_dict(e) for e in events]})
    else:
        tables.print_session_history(tables.console(), session_id, events)
    return EXIT_OK


def _print_outcome(outcome: CommandOutcome, now_ms: int, as_json: bool) -> None:
    view = connection_view(outcome.connection, now_ms, outcome.sessions)
    result = "accepted" if outcome.changed else "unchanged"
    if as_json:
        _print_json({"result": result, "connection": view})
    else:
        tables.print_outcome(tables.console(), result, outcome.connection, now_ms, outcome.sessions)


def _print_json(document: Any) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False))
