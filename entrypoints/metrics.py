"""The worker's metrics as composed: its backend's publisher (CloudWatch on AWS, a JSON log line
on one host) and, beside it, Prometheus for scraping at the health port's `/metrics`. Every
recording goes to both; neither knows of the other."""

import platform
from collections.abc import Callable
from importlib import metadata

from adapters.prometheus import PrometheusMetrics
from application.ports import Metrics


class TeeMetrics:
    """The metrics port over several adapters: each recording to each, in order."""

    def __init__(self, *targets: Metrics) -> None:
        self._targets = targets

    def count(self, name: str, value: float = 1.0) -> None:
        for target in self._targets:
            target.count(name, value)

    def gauge(self, name: str, value: float) -> None:
        for target in self._targets:
            target.gauge(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        for target in self._targets:
            target.timing(name, milliseconds)

    def track(self, name: str, total: Callable[[], float]) -> None:
        for target in self._targets:
            target.track(name, total)

    async def flush(self) -> None:
        for target in self._targets:
            await target.flush()  # the port's promise: never raises


def build_info(backend: str) -> dict[str, str]:
    try:
        version = metadata.version("wsfleet")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    return {"version": version, "python": platform.python_version(), "backend": backend}


def prometheus_metrics(backend: str) -> PrometheusMetrics:
    return PrometheusMetrics(build_info(backend))
