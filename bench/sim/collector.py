"""The cyclic garbage collector, kept from the simulation's way, and timed.

A thousand workers and 100,000 connections are tens of millions of objects, nearly all of
them alive for the whole run. CPython's collector scans every one of them at each full
collection, and at 1,000 workers those took most of the run (py-spy: 40 % of the samples on
a frame being made, the collection it set off). `Collector.freeze` moves what is alive now
out of the collector's sight (`gc.freeze`); the run calls it every few virtual seconds, so a
collection looks only at what was made since. What a frozen cycle holds is never freed: the
run's memory is measured (`peak_rss_mib`), and it ends with the run."""

import gc
import time
from collections.abc import Callable
from typing import Any


class Collector:
    def __init__(self) -> None:
        self.collections = 0
        self.seconds = 0.0  # in collections, wall
        self._started: float | None = None
        self._callback: Callable[[str, dict[str, Any]], None] = self._on_collection

    def __enter__(self) -> "Collector":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)
        gc.unfreeze()

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.collections += 1
            self.seconds += time.perf_counter() - self._started
            self._started = None

    @staticmethod
    def freeze() -> None:
        gc.freeze()
