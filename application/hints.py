"""Hints go out twice: now, and a copy the queue holds back for a second.

A worker killed during a long poll leaves that receive open on the queue's server, which hands
it the next messages to arrive and hides them for the visibility timeout (SQS finishes the
receive server-side; moto does the same). Whatever was hinted into that window would wait for
the timeout, or for a full scan: the chaos suite saw a START picked up 3.7 s late and a
balancing handoff 3.7 s late, each just after a SIGKILL. The abandoned poll returns with the
first batch that arrives, so the copy, a second later, reaches a live worker.

A copy rather than a second send after a wait: the sender (the API, a session handing back,
a worker shutting down) does not wait for it. A copy is received marked `delayed`; a worker
reads the connection before it acts on one (worker/loops.py, `_taken_already`), so a copy
whose first round was taken costs a receive and a read, not a refused acquire.
(application/deaths.py repeats its hints in-process, 0.3 s apart: it has a latency target of
its own and nothing else to wait for.)
"""

import logging
from collections.abc import Mapping, Sequence

from application.errors import QueueUnavailable
from application.ports import NotificationQueue

log = logging.getLogger(__name__)

REPEAT_S = 1  # the copy's delay (the queue's own, in whole seconds)


async def send_hints(
    queue: NotificationQueue, connection_ids: Sequence[str], extra: Mapping[str, object]
) -> None:
    """Raises QueueUnavailable if the first round fails; a copy that fails is only logged
    (`extra` names who sent it): the hints went out once."""
    await queue.send(connection_ids)
    try:
        await queue.send(connection_ids, delay_s=REPEAT_S)
    except QueueUnavailable as exc:
        log.info("%d hint(s) went out once, not twice: %s", len(connection_ids), exc, extra=extra)
