from adapters.cloudwatch.aggregate import MetricAggregator
from adapters.cloudwatch.schema import MAX_ABS_VALUE


def test_counters_are_summed_and_restart_after_a_drain() -> None:
    aggregator = MetricAggregator()
    aggregator.count("Acquired", 1)
    aggregator.count("Acquired", 2.5)

    assert aggregator.drain().counters == {"Acquired": 3.5}
    assert aggregator.drain().counters == {}


def test_a_gauge_reports_its_last_value_at_every_drain() -> None:
    aggregator = MetricAggregator()
    aggregator.gauge("Active", 5)
    aggregator.gauge("Active", 7)

    assert aggregator.drain().gauges == {"Active": 7}
    assert aggregator.drain().gauges == {"Active": 7}


def test_repeated_timings_share_one_entry_within_three_significant_digits() -> None:
    aggregator = MetricAggregator()
    for milliseconds in (120.01, 120.04, 119.96, 3.0):
        aggregator.timing("Handoff", milliseconds)

    timing = aggregator.drain().timings["Handoff"]

    assert timing.counts == {120.0: 3, 3.0: 1}
    assert timing.overflow_count == 0


def test_distinct_timings_past_the_cap_keep_only_count_sum_and_extremes() -> None:
    aggregator = MetricAggregator(max_distinct_timing_values=10)
    for milliseconds in range(1, 101):
        aggregator.timing("Handoff", milliseconds)
    aggregator.timing("Handoff", 5)  # a value already held still goes to its entry

    timing = aggregator.drain().timings["Handoff"]

    assert len(timing.counts) == 10
    assert timing.counts[5.0] == 2
    assert sum(timing.counts.values()) + timing.overflow_count == 101
    assert (timing.overflow_count, timing.overflow_sum) == (90, sum(range(11, 101)))
    assert (timing.overflow_min, timing.overflow_max) == (11, 100)


def test_values_cloudwatch_refuses_are_dropped_or_brought_into_range() -> None:
    aggregator = MetricAggregator()
    aggregator.timing("Handoff", float("nan"))
    aggregator.gauge("Active", float("-inf"))
    aggregator.gauge("Huge", 1e300)
    aggregator.gauge("Tiny", 1e-200)

    snapshot = aggregator.drain()

    assert aggregator.dropped == 2
    assert snapshot.timings == {}
    assert snapshot.gauges == {"Huge": MAX_ABS_VALUE, "Tiny": 0.0}


def test_metric_names_past_the_cap_are_dropped_and_counted() -> None:
    aggregator = MetricAggregator(max_names=3)
    for i in range(5):
        aggregator.count(f"Counter{i}", 1)
    aggregator.count("Counter0", 1)

    assert aggregator.drain().counters == {"Counter0": 2, "Counter1": 1, "Counter2": 1}
    assert aggregator.dropped == 2
