"""The Prometheus adapter: every catalogue metric exported from the start under the one naming
rule, recordings land in the right series (timings in seconds), and what the catalogue lacks
is dropped and counted, never raised."""

from prometheus_client.parser import text_string_to_metric_families

from adapters.memory.metrics import InMemoryMetrics
from adapters.prometheus import PrometheusMetrics, prometheus_name
from application.ports.metrics import (
    ACTIVE_CONNECTIONS,
    CATALOGUE,
    INGEST_LAG_MS,
    LEASE_ACQUISITIONS,
    MESSAGES_RECEIVED,
    Kind,
    MetricSpec,
)
from entrypoints.metrics import TeeMetrics


def samples(metrics: PrometheusMetrics) -> dict[str, float]:
    """Sample name -> value; a bucket is `name{le=bound}`."""
    _, body = metrics.scrape()
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            bound = s.labels.get("le")
            found[s.name + ("" if bound is None else f"{{le={bound}}}")] = s.value
    return found


def test_the_naming_rule() -> None:
    assert prometheus_name(MetricSpec("LeaseAcquisitions", Kind.COUNTER, "")) == (
        "wsfleet_lease_acquisitions_total"
    )
    assert prometheus_name(MetricSpec("IngestLagMs", Kind.TIMING, "")) == (
        "wsfleet_ingest_lag_seconds"
    )
    assert prometheus_name(MetricSpec("ActiveConnections", Kind.GAUGE, "")) == (
        "wsfleet_active_connections"
    )


def test_every_catalogue_metric_is_exported_before_anything_is_recorded() -> None:
    exported = samples(PrometheusMetrics({"version": "1", "python": "3", "backend": "x"}))
    for spec in CATALOGUE:
        name = prometheus_name(spec)
        key = name + "_count" if spec.kind is Kind.TIMING else name
        assert exported[key] == 0, spec.name
    assert exported["wsfleet_build_info"] == 1
    assert len({prometheus_name(s) for s in CATALOGUE}) == len(CATALOGUE)


def test_recordings_land_in_their_series_and_timings_are_seconds() -> None:
    metrics = PrometheusMetrics({"version": "1", "python": "3", "backend": "x"})
    metrics.count(LEASE_ACQUISITIONS, 2)
    metrics.gauge(ACTIVE_CONNECTIONS, 7)
    metrics.timing(INGEST_LAG_MS, 40)  # 0.04 s: in the 0.05 bucket, not the 0.025 one
    exported = samples(metrics)
    assert exported["wsfleet_lease_acquisitions_total"] == 2
    assert exported["wsfleet_active_connections"] == 7
    assert exported["wsfleet_ingest_lag_seconds_count"] == 1
    assert exported["wsfleet_ingest_lag_seconds_sum"] == 0.04
    assert exported["wsfleet_ingest_lag_seconds_bucket{le=0.025}"] == 0
    assert exported["wsfleet_ingest_lag_seconds_bucket{le=0.05}"] == 1


def test_a_name_outside_the_catalogue_or_a_value_without_meaning_is_dropped_and_counted() -> None:
    metrics = PrometheusMetrics({})
    metrics.count("NoSuchMetric")
    metrics.timing(ACTIVE_CONNECTIONS, 1)  # a gauge recorded as a timing: a bug
    metrics.count(LEASE_ACQUISITIONS, -1)  # a counter never goes down
    metrics.count(LEASE_ACQUISITIONS, float("nan"))
    metrics.gauge(ACTIVE_CONNECTIONS, float("inf"))
    metrics.timing(INGEST_LAG_MS, float("-inf"))
    assert metrics.dropped == 6
    assert samples(metrics)["wsfleet_lease_acquisitions_total"] == 0


async def test_the_tee_records_to_each_target() -> None:
    first, second = InMemoryMetrics(), InMemoryMetrics()
    tee = TeeMetrics(first, second)
    tee.count(LEASE_ACQUISITIONS)
    tee.gauge(ACTIVE_CONNECTIONS, 3)
    tee.timing(INGEST_LAG_MS, 5)
    await tee.flush()
    for target in (first, second):
        assert target.counters[LEASE_ACQUISITIONS] == 1
        assert target.gauges[ACTIVE_CONNECTIONS] == 3
        assert target.timings[INGEST_LAG_MS] == [5]
        assert target.flushes == 1


def test_a_tracked_running_total_is_read_at_scrape_time() -> None:
    metrics = PrometheusMetrics({})
    received = [0]
    metrics.track(MESSAGES_RECEIVED, lambda: received[0])
    metrics.count(MESSAGES_RECEIVED, 2)  # a count still adds to it
    received[0] = 40
    assert samples(metrics)["wsfleet_messages_received_total"] == 42
    received[0] = 41
    assert samples(metrics)["wsfleet_messages_received_total"] == 43  # no flush in between


def test_the_process_and_gc_collectors_are_on_and_no_created_series_pad_the_page() -> None:
    metrics = PrometheusMetrics({})
    metrics.count(LEASE_ACQUISITIONS)
    metrics.timing(INGEST_LAG_MS, 40)
    _, body = metrics.scrape()
    exported = samples(metrics)
    assert exported["process_resident_memory_bytes"] > 0
    assert "process_cpu_seconds_total" in exported
    assert any(name.startswith("python_gc_objects_collected_total") for name in exported)
    assert b"_created" not in body
