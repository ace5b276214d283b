"""Metrics on Amazon CloudWatch. `CloudWatchMetrics` is imported when first used
(adapters/lazy.py)."""

from typing import TYPE_CHECKING

from adapters.lazy import exports

if TYPE_CHECKING:
    from adapters.cloudwatch.metrics import CloudWatchMetrics

__all__ = ["CloudWatchMetrics"]

if not TYPE_CHECKING:  # mypy reads the imports above, and refuses any other name
    __getattr__ = exports(__name__, {"CloudWatchMetrics": "metrics"})
