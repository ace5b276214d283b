"""The worker process's garbage-collector thresholds (WSFLEET_GC_THRESHOLDS).

A worker holds thousands of long-lived objects per connection (sockets, tasks, buffers) and
creates short-lived ones for every message and heartbeat. With CPython's 700,10,10 the young
generation was collected about 50 times a second and each full collection walked everything
held: 0.5 s pauses of the event loop at 5,000 connections, and a quarter of the worker's CPU
(bench/RESULTS.md). Reference counting frees nearly all of those objects the moment they are
dropped; the collector is only needed for cycles, so it can run far less often.
"""

import gc
import logging

log = logging.getLogger(__name__)


def parse_thresholds(spec: str) -> tuple[int, int, int] | None:
    """'gen0,gen1,gen2' as three ints; None for 'python' (leave CPython's own)."""
    if spec == "python":
        return None
    gen0, gen1, gen2 = (int(part) for part in spec.split(","))
    return gen0, gen1, gen2


def tune_gc(spec: str) -> None:
    thresholds = parse_thresholds(spec)
    if thresholds is None:
        return
    gc.set_threshold(*thresholds)
    log.debug("gc thresholds set to %s", thresholds)
