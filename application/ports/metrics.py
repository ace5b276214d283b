"""The metrics port: counters, gauges and timings, aggregated in-process, published in batches.

Recording never blocks and never fails; `flush` publishes and must not raise (a failure to
publish metrics must never affect the connections): adapters log and count it instead.

A counter bumped per message would cost a metrics call per message; such a count is kept as a
plain running total by its owner and handed over once with `track`: an adapter that publishes
(CloudWatch, the JSON log) publishes its growth at each flush, one that is read (Prometheus)
reads it at scrape time, so a scrape is as current as the count itself.

The catalogue is documented in docs/metrics.md, generated from it (`python -m
entrypoints.metrics_doc > docs/metrics.md`; a unit test keeps it current).

Every metric the code records is named here, once, with its kind and meaning (`CATALOGUE`):
CloudWatch publishes under these names, the Prometheus adapter derives its names from them,
and infra/ alarms, the dashboards and the ECS scaling policy are checked against them.
"""

import enum
from collections.abc import Callable
from typing import NamedTuple, Protocol

# Metric names, one place (infra/ alarms and the ECS scaling policy refer to these).
ACTIVE_CONNECTIONS = "ActiveConnections"
LEASE_ACQUISITIONS = "LeaseAcquisitions"
ACQUISITION_CONFLICTS = "AcquisitionConflicts"
LEASES_LOST = "LeasesLost"
LEASE_RELEASES = "LeaseReleases"
TAKEOVERS = "ExpiredLeaseTakeovers"
HANDOFF_LATENCY_MS = "HandoffLatencyMs"
HANDOFF_WAIT_MS = "HandoffWaitMs"
RENEW_LATENCY_MS = "RenewLatencyMs"
MESSAGES_RECEIVED = "MessagesReceived"
MESSAGES_INGESTED = "MessagesIngested"
MESSAGES_REJECTED = "MessagesRejected"
MESSAGES_SKIPPED = "MessagesSkippedByUpstream"
INGEST_LAG_MS = "IngestLagMs"
ORPHANS_FOUND = "OrphansFound"
STORE_ERRORS = "StoreErrors"
SINK_ERRORS = "SinkErrors"
# Messages a sink wrote again within one batch because the service left them unprocessed.
SINK_RETRIES = "SinkRetries"
UPSTREAM_RECONNECTS = "UpstreamReconnects"
UPSTREAM_GIVE_UPS = "UpstreamGiveUps"
MALFORMED_HINTS = "MalformedHints"
SELF_FENCES = "SelfFences"
LOOP_LAG_MS = "EventLoopLagMs"
HOLDING_WITHOUT_STORING_S = "SecondsHoldingWithoutStoring"
# Upstream input: seqs at or below what was received, dropped; forward jumps beyond
# the window (an upstream fault); other data for a stored seq; messages refused at the boundary.
REPLAYS_DROPPED = "ReplaysDropped"
SEQ_JUMPS = "SeqJumps"
SEQ_CONFLICTS = "SeqConflicts"
BALANCE_HANDOFFS = "BalanceHandoffs"


class Kind(enum.Enum):
    COUNTER = "counter"  # `count`: summed
    GAUGE = "gauge"  # `gauge`: the last value
    TIMING = "timing"  # `timing`: milliseconds, a distribution


class MetricSpec(NamedTuple):
    name: str
    kind: Kind
    help: str


CATALOGUE: tuple[MetricSpec, ...] = (
    MetricSpec(ACTIVE_CONNECTIONS, Kind.GAUGE, "Connections this worker holds."),
    MetricSpec(LEASE_ACQUISITIONS, Kind.COUNTER, "Leases acquired (new or taken over)."),
    MetricSpec(ACQUISITION_CONFLICTS, Kind.COUNTER, "Acquisitions another worker won."),
    MetricSpec(LEASES_LOST, Kind.COUNTER, "Leases found held by another owner at renewal."),
    MetricSpec(LEASE_RELEASES, Kind.COUNTER, "Leases handed back (stop, handoff, end, error)."),
    MetricSpec(TAKEOVERS, Kind.COUNTER, "Acquisitions of a lease another worker let expire."),
    MetricSpec(
        HANDOFF_LATENCY_MS,
        Kind.TIMING,
        "At a graceful shutdown, from the stop request to a connection released and hinted to "
        "the fleet (one per connection handed over).",
    ),
    MetricSpec(
        HANDOFF_WAIT_MS,
        Kind.TIMING,
        "On the acquiring worker, how long a connection it acquired had been free: from its "
        "release by the previous owner (or its restart, or its back-off's end) to this "
        "acquire; the other side of HandoffLatencyMs (one per acquire after a release; the "
        "two times come from two hosts' clocks).",
    ),
    MetricSpec(RENEW_LATENCY_MS, Kind.TIMING, "Latency of one lease renewal call to the store."),
    MetricSpec(MESSAGES_RECEIVED, Kind.COUNTER, "Messages received from upstreams."),
    MetricSpec(MESSAGES_INGESTED, Kind.COUNTER, "Messages durably stored in the sink."),
    MetricSpec(MESSAGES_REJECTED, Kind.COUNTER, "Upstream messages rejected as bad input."),
    MetricSpec(MESSAGES_SKIPPED, Kind.COUNTER, "Seqs an upstream skipped (lost upstream)."),
    MetricSpec(
        INGEST_LAG_MS, Kind.TIMING, "Receipt to storage of each written batch's oldest message."
    ),
    MetricSpec(ORPHANS_FOUND, Kind.GAUGE, "Orphaned connections seen by the last scan."),
    MetricSpec(STORE_ERRORS, Kind.COUNTER, "Failed calls to the connection store or queue."),
    MetricSpec(SINK_ERRORS, Kind.COUNTER, "Failed batch writes to the message sink."),
    MetricSpec(
        SINK_RETRIES, Kind.COUNTER, "Messages retried within a sink batch (left unprocessed)."
    ),
    MetricSpec(UPSTREAM_RECONNECTS, Kind.COUNTER, "Upstream reconnections after a drop."),
    MetricSpec(UPSTREAM_GIVE_UPS, Kind.COUNTER, "Connections handed back after upstream failures."),
    MetricSpec(MALFORMED_HINTS, Kind.COUNTER, "Queue hints dropped as malformed."),
    MetricSpec(SELF_FENCES, Kind.COUNTER, "Sessions ended because their lease ran out of trust."),
    MetricSpec(
        REPLAYS_DROPPED,
        Kind.COUNTER,
        "Upstream messages at or below a seq already received, dropped.",
    ),
    MetricSpec(
        SEQ_JUMPS, Kind.COUNTER, "Upstream seq jumps beyond the window: the connection backs off."
    ),
    MetricSpec(
        SEQ_CONFLICTS,
        Kind.COUNTER,
        "Other data for a stored seq: kept the stored copy, failed the connection.",
    ),
    MetricSpec(
        BALANCE_HANDOFFS,
        Kind.COUNTER,
        "Connections handed off because this worker held more than its share.",
    ),
    MetricSpec(LOOP_LAG_MS, Kind.TIMING, "How late the event loop wakes a timer (loop lag)."),
    # Its Maximum over the service is the worst worker's: the alarm on a worker that holds
    # connections yet stores nothing needs no per-task dimension.
    MetricSpec(
        HOLDING_WITHOUT_STORING_S,
        Kind.GAUGE,
        "Seconds this worker has held connections without storing a message (0: holds none).",
    ),
)


class Metrics(Protocol):
    def count(self, name: str, value: float = 1.0) -> None: ...

    def gauge(self, name: str, value: float) -> None: ...

    def timing(self, name: str, milliseconds: float) -> None: ...

    def track(self, name: str, total: Callable[[], float]) -> None:
        """Counter `name` also grows with `total()`, a running total that never decreases,
        cheap to read (read at flush or scrape time, on the event loop)."""
        ...

    async def flush(self) -> None: ...


class RunningTotals:
    """The totals handed to `Metrics.track`, for the adapters to share: summed now (`now`,
    for a scrape) or as growth since the last look (`growth`, for a publisher)."""

    def __init__(self) -> None:
        self._tracked: list[tuple[str, Callable[[], float]]] = []
        self._last: list[float] = []

    def track(self, name: str, total: Callable[[], float]) -> None:
        self._tracked.append((name, total))
        self._last.append(total())

    def now(self, name: str) -> float:
        return sum(total() for tracked, total in self._tracked if tracked == name)

    def growth(self) -> dict[str, float]:
        """Each name's growth since the previous call (names that did not grow left out)."""
        grown: dict[str, float] = {}
        for index, (name, total) in enumerate(self._tracked):
            value = total()
            delta, self._last[index] = value - self._last[index], value
            if delta > 0:
                grown[name] = grown.get(name, 0.0) + delta
        return grown
