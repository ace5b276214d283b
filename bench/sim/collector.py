"""The cyclic garbage collector, kept from the simulation's way, and timed.

A thousand workers and 100,000 connections are tens of millions of objects, nearly all of
them alive for the whole run. CPython's collector scans every one of them at each full
collection, and at 1,000 workers those took most of the run (py-spy: 40 % of the samples on
a frame being made, the collection it set off). While a `Collector` is entered the automatic
collections are off; `Collector.sweep`, which the run calls every virtual second, collects
the young generations (what was made since the last sweep: the cycles a run makes are
short-lived) and moves what survives out of the collector's sight (`gc.freeze`). What a
frozen cycle holds is never freed: the run's memory is measured (`peak_rss_mib`), and it ends
with the run. At 100 x 10,000 the AZ loss took 26.4 s of CPU with the collector as it is,
17.9 with a freeze every second (4.9 s of it collecting), 12.7 so, and 11.5 with no
collection at all, at the same RSS and figures."""

import gc
import time
from collections.abc import Callable
from typing import Any


class Collector:
    def __init__(self) -> None:
        self.collections = 0
        self.seconds = 0.0  # in collections, wall
        self._started: float | None = None
        self._was_enabled = True
        self._callback: Callable[[str, dict[str, Any]], None] = self._on_collection

    def __enter__(self) -> "Collector":
        gc.callbacks.append(self._callback)
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.collections += 1
            self.seconds += time.perf_counter() - self._started
            self._started = None

    @staticmethod
    def sweep() -> None:
        gc.collect(1)
        gc.freeze()
