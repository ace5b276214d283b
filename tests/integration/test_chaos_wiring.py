"""WSFLEET_CHAOS_CONTROL wires fault injectors into a worker, and nothing at all without it."""

import asyncio
import json
from pathlib import Path

from adapters.faults.clock import SkewedClock
from adapters.faults.store import FaultInjectingStore
from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from application.worker.worker import Worker
from entrypoints.chaos import chaos_faults
from entrypoints.containers import provide, shutdown
from entrypoints.embedded import EmbeddedContainer
from entrypoints.settings import load_settings


async def test_without_the_setting_the_worker_gets_the_real_store_and_clock(
    tmp_path: Path,
) -> None:
    settings = load_settings({"WSFLEET_DATA_DIR": str(tmp_path)})
    container = EmbeddedContainer(settings=settings)
    try:
        async with chaos_faults(container, settings):
            worker: Worker = await provide(container.core.worker, worker_id="w")
        assert type(worker.ctx.store) is SqliteConnectionStore
        assert type(worker.ctx.clock) is SystemClock
    finally:
        await shutdown(container)


async def test_with_the_setting_the_control_file_steers_the_workers_store_and_clock(
    tmp_path: Path,
) -> None:
    control = tmp_path / "chaos.json"
    control.write_text(json.dumps({"revision": 1, "skew_ms": 500}))
    settings = load_settings(
        {"WSFLEET_DATA_DIR": str(tmp_path), "WSFLEET_CHAOS_CONTROL": str(control)}
    )
    container = EmbeddedContainer(settings=settings)
    try:
        async with chaos_faults(container, settings):
            worker: Worker = await provide(container.core.worker, worker_id="w")
            store, clock = worker.ctx.store, worker.ctx.clock
            assert isinstance(store, FaultInjectingStore)
            assert isinstance(clock, SkewedClock)
            assert clock.skew_ms == 500  # applied before the worker's first store call

            control.with_suffix(".tmp").write_text(json.dumps({"revision": 2, "outage": True}))
            control.with_suffix(".tmp").replace(control)
            async with asyncio.timeout(5):
                while not store.outage:  # noqa: ASYNC110  (the control polls a file)
                    await asyncio.sleep(0.02)
            assert clock.skew_ms == 0
    finally:
        await shutdown(container)
