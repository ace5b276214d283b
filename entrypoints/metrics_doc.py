"""docs/metrics.md, generated from the metrics catalogue (application/ports/metrics.py; a test
keeps the file in sync): `python -m entrypoints.metrics_doc > docs/metrics.md`."""

import sys

from adapters.prometheus import prometheus_name
from application.ports.metrics import CATALOGUE, Kind, MetricSpec

_INTRO = """\
# Metrics

<!-- Generated from the catalogue in application/ports/metrics.py by
     `python -m entrypoints.metrics_doc > docs/metrics.md`; tests/unit/test_metrics_doc.py
     keeps this file equal to the catalogue. Edit the catalogue, not this file. -->

Every worker records the metrics below. On AWS they go to CloudWatch (namespace
`WSFLEET_METRICS_NAMESPACE`, dimension `ServiceName`) every `WSFLEET_METRICS_INTERVAL_S`; on
one host, to one JSON log line (message `metrics`) per interval. On either backend the worker
serves them in Prometheus' text format at `/metrics` on its health port (`WSFLEET_HEALTH_PORT`),
current at every scrape.

Prometheus names follow one rule: `wsfleet_` + snake case, counters end in `_total`, timings
are histograms in seconds (`IngestLagMs` -> `wsfleet_ingest_lag_seconds`, with `_bucket`,
`_count` and `_sum`). No label is added per connection: one series per metric per worker
(Prometheus adds `instance`). Beside them a scrape has `wsfleet_build_info{version,python,
backend}`, the client library's `process_*` series (resident memory, CPU seconds, open file
descriptors) and `python_gc_*` series, and no `_created` series.

| CloudWatch | Prometheus | Kind | Meaning |
| --- | --- | --- | --- |
"""

_KINDS = {Kind.COUNTER: "counter", Kind.GAUGE: "gauge", Kind.TIMING: "histogram (ms in CloudWatch)"}


def render() -> str:
    return _INTRO + "".join(_row(spec) for spec in CATALOGUE)


def _row(spec: MetricSpec) -> str:
    meaning = spec.help.replace("|", "\\|")
    return f"| `{spec.name}` | `{prometheus_name(spec)}` | {_KINDS[spec.kind]} | {meaning} |\n"


if __name__ == "__main__":
    sys.stdout.write(render())
