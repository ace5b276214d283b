"""docs/settings.md, generated from the settings table (a test keeps the file in sync):
`python -m entrypoints.settings > docs/settings.md`."""

from typing import Any

from application.config import WorkerConfig
from entrypoints.settings.table import GROUPS, ROUTER, WORKER, Setting

# us-east-1 on-demand list prices per million request units (check your region's).
WRITE_PRICE_PER_MILLION = 0.625
READ_PRICE_PER_MILLION = 0.125
# A renewal updates the item (1 WRU) and moves its orphan-index entry: the index sort key
# (available_at_ms) changes, which DynamoDB does as a delete plus a put (2 WRU).
WRU_PER_RENEWAL = 3
# Desired-state checks: BatchGetItem, eventually consistent: 0.5 RRU per item.
RRU_PER_CHECK = 0.5
HOURS_PER_MONTH = 730

_INTRO = """\
# Settings

<!-- Generated from entrypoints/settings/table.py by
     `python -m entrypoints.settings > docs/settings.md`; tests/unit/test_settings.py keeps
     this file equal to the table. Edit the table, not this file. -->

Every setting is an environment variable, read once at start-up into a typed, validated,
immutable `Settings` object (`entrypoints/settings/`). An empty variable counts as unset. An
unknown `WSFLEET_*` variable is refused, because a typo would otherwise silently keep the
default. Every problem is reported at once, one line each, naming the variable and what it
allows; the worker then exits with code 2 (the Lambda router fails its invocation):

```
wsfleet worker: invalid configuration (2 problems):
  WSFLEET_LEASE_MSS: unknown variable; did you mean WSFLEET_LEASE_MS? (see docs/settings.md)
  WSFLEET_POLL_BATCH='11': expected integer 1..10
```

"Used by": `worker` is the worker process (the ECS task), `router` the Lambda event router
(and the local API).
"""


def render() -> str:
    parts = [_INTRO]
    for title, settings in GROUPS:
        parts.append(f"\n## {title}\n\n")
        parts.append("| Variable | Default | Allowed | Used by | Meaning |\n")
        parts.append("| --- | --- | --- | --- | --- |\n")
        parts += [_row(s) for s in settings]
    parts.append(_defaults_section())
    parts.append(_cost_section())
    return "".join(parts)


def _row(setting: Setting) -> str:
    users = ", ".join(u for u in (WORKER, ROUTER) if u in setting.used_by)
    cells = (
        f"`{setting.name}`",
        _default(setting.default),
        setting.kind.describe(),
        users,
        setting.meaning,
    )
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n"


def _default(value: Any) -> str:
    if value is None or value == ():
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return "`" + ",".join(value) + "`"
    return f"`{value}`"


_DEFAULTS = """
## Why these defaults

- Lease 20 s, heartbeat 5 s, desired-state check 10 s, reconciliation at least every 60 s,
  100 connections per worker: the article's starting points. Reconciliation also wakes when
  the next lease can expire, so a crashed worker's connections move about one lease after its
  last renewal (docs/decisions.md).
- Self-fence margin 6 s: a worker stops trusting its lease 6 s before it could expire, which
  covers a quarter-lease clock skew (measured in tests/unit/test_worker_resilience.py; see
  docs/decisions.md).
- Shutdown budget 20 s: inside ECS's default 30 s `stopTimeout`, so a rolling deploy's SIGTERM
  always ends in released leases and handoff hints, never in a SIGKILL. Keep
  `stopTimeout` > budget + 5 s (the worker's own watchdog exits at budget + 5 s).
- AWS calls: 3 attempts in botocore's `standard` retry mode, 2 s to connect, 5 s to answer
  (botocore's defaults are the legacy mode and 60 s, longer than a lease). The DynamoDB
  connection pool is sized from `WSFLEET_MAX_CONNECTIONS` (+16), because botocore's default
  of 10 would queue the heartbeats of a full worker behind each other.
- Health endpoint on 127.0.0.1:8080: the ECS health check runs inside the container
  (`python -m entrypoints.worker.healthcheck`), so nothing needs to listen outside it.
"""


def _defaults_section() -> str:
    return _DEFAULTS


def _cost_section() -> str:
    d = WorkerConfig()
    rows = []
    for heartbeat, check in (
        (d.heartbeat_interval_s, d.desired_state_interval_s),
        (2, 5),
        (10, 10),
        (10, 30),
    ):
        writes = 3600 / heartbeat * WRU_PER_RENEWAL
        reads = 3600 / check * RRU_PER_CHECK
        dollars = (writes * WRITE_PRICE_PER_MILLION + reads * READ_PRICE_PER_MILLION) / 1e6
        label = (
            " (default)"
            if (heartbeat, check) == (d.heartbeat_interval_s, d.desired_state_interval_s)
            else ""
        )
        rows.append(
            f"| {heartbeat:g} s{label} | {check:g} s | {writes:,.0f} | {reads:,.0f} | "
            f"${dollars:.5f} | ${dollars * HOURS_PER_MONTH * 1000:,.0f} |\n"
        )
    return (
        "\n## What the timings cost on DynamoDB\n\n"
        "Per connection-hour in on-demand request units, at us-east-1 list prices "
        f"(${WRITE_PRICE_PER_MILLION} per million writes, ${READ_PRICE_PER_MILLION} per "
        "million reads; check your region). A heartbeat is one conditional UpdateItem (1 WRU) "
        f"that also moves the item's entry in the orphan index (2 WRU): {WRU_PER_RENEWAL} WRU. "
        "A desired-state check is an eventually consistent BatchGetItem: 0.5 RRU per "
        "connection. The lease length itself costs nothing; it sets how long a crashed "
        "worker's connections wait (keep it at least 3-4 heartbeats plus the self-fence "
        "margin).\n\n"
        "| Heartbeat | Desired-state check | WRU/h | RRU/h | $ per connection-hour "
        "| $ per 1,000 connections per month |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        + "".join(rows)
        + "\nNot included: messages (1 WRU per message under 1 KB, through the default sink), "
        "lease changes (a transaction of about 4-6 WRU per acquire, release or STOP), "
        "reconciliation (a few index queries per worker per lease, not per connection), SQS "
        "and CloudWatch.\n"
    )
