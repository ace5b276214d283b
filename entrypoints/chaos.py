"""Fault injection into a real worker process, for chaos runs only (WSFLEET_CHAOS_CONTROL).

When the setting names a control file, the worker's store is put behind a FaultInjectingStore,
its sink behind a FaultInjectingSink and its clock behind a SkewedClock, all steered by that
file (adapters/faults/control.py), by overriding the core container's `store`, `sink` and
`clock` before the worker is built. When it is
unset — always, in production — this does nothing at all: no decorator, no task, no file read.
The decorators are dev tooling (wsfleet-dev), imported only when the setting is given: the
worker image does not hold them, and there the setting is refused with one line.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dependency_injector import providers

from adapters.system.clock import SystemClock
from entrypoints import dev_tooling
from entrypoints.containers import provide
from entrypoints.settings import Settings

log = logging.getLogger(__name__)


@asynccontextmanager
async def chaos_faults(container: Any, settings: Settings) -> AsyncIterator[None]:
    """Wrap the worker's store, sink and clock in `container` (any backend's: each has
    `store`, `sink` and `core`) for as long as the context lasts.
    Enter it before asking the container for the worker."""
    if settings.chaos_control is None:
        yield
        return
    dev_tooling.require("adapters.faults", "WSFLEET_CHAOS_CONTROL")
    from adapters.faults.clock import SkewedClock
    from adapters.faults.control import ChaosControl
    from adapters.faults.sink import FaultInjectingSink
    from adapters.faults.store import FaultInjectingStore

    clock = SkewedClock(SystemClock(), 0)
    store = FaultInjectingStore(await provide(container.store), clock)
    sink = FaultInjectingSink(await provide(container.sink), clock)
    control = ChaosControl(Path(settings.chaos_control), store, clock, sink=sink)
    await control.poll()  # faults already in the file apply before the first store call
    log.warning(
        "CHAOS CONTROL ENABLED: store and sink faults and clock skew are injected from %s "
        "(never set WSFLEET_CHAOS_CONTROL in production)",
        settings.chaos_control,
    )
    with (
        container.core.store.override(providers.Object(store)),
        container.core.sink.override(providers.Object(sink)),
        container.core.clock.override(providers.Object(clock)),
    ):
        task = asyncio.create_task(control.run(), name="chaos-control")
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
