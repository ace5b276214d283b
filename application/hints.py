"""Hints go out twice: now, and a copy the queue holds back for a second.

A worker killed during a long poll leaves that receive open on the queue's server, which hands
it the next messages to arrive and hides them for the visibility timeout (SQS finishes the
receive server-side; moto does the same). Whatever was hinted into that window would wait for
the timeout, or for a full scan: the chaos suite saw a START picked up 3.7 s late and a
balancing handoff 3.7 s late, each just after a SIGKILL. The abandoned poll returns with the
first batch that arrives, so the copy, a second later, reaches a live worker.

A copy rather than a second send after a wait: the sender (the API, a session handing back,
a worker shutting down) does not wait for it. A copy is received marked `copy`; a worker
reads the connection before it acts on one (worker/loops.py, `_taken_already`), so a copy
whose first round was taken costs a receive and a read, not a refused acquire.

A sender with a latency target of its own and nothing else to wait for sends a second round
in-process, `SECOND_ROUND_S` after the first: a reported death (application/deaths.py) and a
worker shutting down (its handoff's hints, application/worker/worker.py). The queue's copy comes
a whole second later (SQS delays only in whole seconds; moto shows it to a waiting long poll up
to a second later still), past the handoff's 1 s target.
"""

import logging
from collections.abc import Mapping, Sequence

from application.errors import QueueUnavailable
from application.ports import HintOrigin, NotificationQueue

log = logging.getLogger(__name__)

REPEAT_S = 1  # the copy's delay (the queue's own, in whole seconds)
# The in-process second round, this long after the first. The abandoned poll returns with its
# batch as soon as the first round arrives, so the second reaches the live workers. A worker
# shutting down sends it as a copy (a receiver reads the released connection first: a receive
# and a read when the first round was taken); a reported death's connections are still owned
# by the dead session, so its second round is a first round again (a refused acquire). The AWS
# fleet bench: a handoff 13 s after a SIGKILL had its first batch of hints caught by the dead
# worker's poll and waited 1.2-1.5 s for the copy or a scan (handoff p99 1.53 s, target 1 s).
SECOND_ROUND_S = 0.3


async def send_hints(
    queue: NotificationQueue,
    connection_ids: Sequence[str],
    extra: Mapping[str, object],
    origin: HintOrigin | None = None,
) -> None:
    """Raises QueueUnavailable if the first round fails; a copy that fails is only logged
    (`extra` names who sent it): the hints went out once. `origin`: the session releasing
    them, if any (application/ports/queue.py `HintOrigin`)."""
    await queue.send(connection_ids, origin=origin)
    try:
        await queue.send(connection_ids, delay_s=REPEAT_S, copy=True, origin=origin)
    except QueueUnavailable as exc:
        log.info("%d hint(s) went out once, not twice: %s", len(connection_ids), exc, extra=extra)
