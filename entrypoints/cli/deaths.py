"""`wsfleet end-session`: report a known death (application/deaths.py) from the shell, e.g. a
systemd unit's `ExecStopPost=` (docs/supervision.md). Idempotent: a session already dead is
left alone, so running it after a clean stop (which ended the session itself) changes nothing.
"""

import argparse
import json
from collections.abc import Mapping

from application.deaths import DeathOutcome, WorkerDeaths
from application.errors import ConfigurationError
from entrypoints.cli.backend import command_settings, open_backend
from entrypoints.containers import provide

EXIT_OK = 0


async def end_session(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if not (args.worker or args.task or args.session):
        raise ConfigurationError("say whose sessions to end: --worker, --task or --session")
    settings = command_settings(env, writes=False, needs_queue=True)
    outcomes: list[DeathOutcome] = []
    async with open_backend(settings) as container:
        deaths: WorkerDeaths = await provide(container.core.deaths)
        if args.worker:
            outcomes.append(await deaths.worker_died(args.worker, args.reason))
        if args.task:
            outcomes.append(await deaths.task_died(args.task, args.reason))
        for session_id in args.session or ():
            outcomes.append(await deaths.session_died(session_id, args.reason))
    sessions = sorted({s for o in outcomes for s in o.sessions})
    ended = sorted({s for o in outcomes for s in o.ended})
    hinted = sorted({c for o in outcomes for c in o.hinted})
    failed = any(o.hints_failed for o in outcomes)
    if args.json:
        document = {
            "sessions": sessions,
            "ended": ended,
            "hinted": hinted,
            "hints_sent": not failed,
        }
        print(json.dumps(document, indent=2))
    else:
        print(
            f"{len(sessions)} sessions found, {len(ended)} ended now "
            f"({', '.join(ended) or 'none'}), {len(hinted)} connections "
            + (
                "NOT hinted (the queue did not answer; reconciliation will find them)"
                if failed
                else "hinted"
            )
        )
    return EXIT_OK
