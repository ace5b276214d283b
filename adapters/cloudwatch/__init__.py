"""Metrics on Amazon CloudWatch."""

from adapters.cloudwatch.metrics import CloudWatchMetrics

__all__ = ["CloudWatchMetrics"]
