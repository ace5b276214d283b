"""The metrics port: counters, gauges and timings, aggregated in-process, published in batches.

Recording never blocks and never fails; `flush` publishes and must not raise (a failure to
publish metrics must never affect the connections): adapters log and count it instead.
"""

from typing import Protocol

# Metric names, one place (infra/ alarms and the ECS scaling policy refer to these).
ACTIVE_CONNECTIONS = "ActiveConnections"
LEASE_ACQUISITIONS = "LeaseAcquisitions"
ACQUISITION_CONFLICTS = "AcquisitionConflicts"
LEASES_LOST = "LeasesLost"
TAKEOVERS = "ExpiredLeaseTakeovers"
HANDOFF_LATENCY_MS = "HandoffLatencyMs"
MESSAGES_INGESTED = "MessagesIngested"
MESSAGES_SKIPPED = "MessagesSkippedByUpstream"
ORPHANS_FOUND = "OrphansFound"
STORE_ERRORS = "StoreErrors"
UPSTREAM_RECONNECTS = "UpstreamReconnects"
UPSTREAM_GIVE_UPS = "UpstreamGiveUps"
MALFORMED_HINTS = "MalformedHints"
SELF_FENCES = "SelfFences"
# Upstream input (issue 13): seqs at or below what was received, dropped; forward jumps beyond
# the window (an upstream fault); other data for a stored seq; messages refused at the boundary.
REPLAYS_DROPPED = "ReplaysDropped"
SEQ_JUMPS = "SeqJumps"
SEQ_CONFLICTS = "SeqConflicts"
MESSAGES_REJECTED = "MessagesRejected"


class Metrics(Protocol):
    def count(self, name: str, value: float = 1.0) -> None: ...

    def gauge(self, name: str, value: float) -> None: ...

    def timing(self, name: str, milliseconds: float) -> None: ...

    async def flush(self) -> None: ...
