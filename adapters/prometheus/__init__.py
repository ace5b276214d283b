"""Metrics for Prometheus: scraped from the worker's health port at `/metrics`."""

from adapters.prometheus.metrics import PrometheusMetrics, prometheus_name

__all__ = ["PrometheusMetrics", "prometheus_name"]
