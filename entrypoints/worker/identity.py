"""The worker id: unique per process incarnation, so a restarted container never impersonates
its previous self (whose leases must expire or be released, never silently renewed).

On ECS it is the task id from the task metadata endpoint (v4), elsewhere the host name, plus
a random suffix. The metadata call runs in a thread with a short timeout: it never blocks the
event loop, and a slow or missing endpoint only costs the nicer name."""

import asyncio
import json
import logging
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping

from application.worker_ids import worker_id_for

log = logging.getLogger(__name__)

METADATA_VARIABLE = "ECS_CONTAINER_METADATA_URI_V4"


async def new_worker_id(environ: Mapping[str, str], timeout_s: float = 1.0) -> str:
    uri = environ.get(METADATA_VARIABLE)
    return worker_id_for(
        (await ecs_task_id(uri, timeout_s) if uri else None) or socket.gethostname()
    )


async def ecs_task_id(metadata_uri: str, timeout_s: float) -> str | None:
    """The task id (last part of the TaskARN) from `<uri>/task`, or None if unavailable."""
    try:
        document = await asyncio.to_thread(_fetch_json, f"{metadata_uri}/task", timeout_s)
        arn = document["TaskARN"] if isinstance(document, dict) else None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # URLError is an OSError
        log.warning("ECS task metadata unavailable, using the host name: %s", exc)
        return None
    if not isinstance(arn, str) or "/" not in arn:
        log.warning("ECS task metadata has no usable TaskARN, using the host name")
        return None
    return arn.rsplit("/", 1)[1]


def _fetch_json(url: str, timeout_s: float) -> object:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read(1_000_000))
