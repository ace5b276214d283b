"""docs/settings.md, generated from the settings table (a test keeps the file in sync):
`python -m entrypoints.settings > docs/settings.md`."""

from typing import Any

from application.config import WorkerConfig
from entrypoints.settings.table import ESSENTIAL, GROUPS, ROUTER, SETTINGS, WORKER, Setting

# us-east-1 on-demand list prices per million request units (check your region's).
WRITE_PRICE_PER_MILLION = 0.625
READ_PRICE_PER_MILLION = 0.125
# A session renewal is one conditional UpdateItem of a small item with no index (1 WRU).
WRU_PER_RENEWAL = 1
# A STOP check is one eventually consistent Query of the sparse stops-by-owner index, which
# holds only STOPPED connections still owned: 0.5 RRU when it finds none.
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


_HEADER = "| Variable | Default | Allowed | Used by | Meaning |\n| --- | --- | --- | --- | --- |\n"


def render() -> str:
    parts = [_INTRO, "\n## The settings you set\n\n", _HEADER]
    parts += [_row(s) for s in SETTINGS if s.name in ESSENTIAL]
    parts.append(
        "\n# Advanced\n\nTuning knobs: the defaults are measured (bench/RESULTS.md) and "
        "rarely need changing. Each is validated by name like the settings above.\n"
    )
    for title, settings in GROUPS:
        advanced = [s for s in settings if s.name not in ESSENTIAL]
        if advanced:
            parts += [f"\n## {title}\n\n", _HEADER, *(_row(s) for s in advanced)]
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

- Lease 4 s, heartbeat 1 s, self-fence margin 1 s, STOP check 2 s: the lease is the
  worker session's, renewed once per worker, so a short one costs 3,600 writes per
  worker-hour whatever the connections. Reconciliation wakes when the next session can
  expire, so a crashed worker's connections are taken about one lease (4 s) after its last
  renewal; a worker that cannot renew for 3 s stops streaming. Clock skew between workers
  must stay below the 1 s margin minus the store's write latency (docs/decisions.md).
- Checkpoint interval 3,600 s: a connection's checkpoint is written once an hour while it
  streams (and on every release); after a crash the new owner resumes from what the sink
  shows stored past it. With a sink that cannot say, lower it: everything after the last
  checkpoint is received again (stored idempotently) after a crash.
- Reconciliation at least every 60 s, 100 connections per worker.
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
        (5, 10),
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
            f"${dollars:.5f} | ${dollars * HOURS_PER_MONTH:,.2f} |\n"
        )
    return (
        "\n## What the timings cost on DynamoDB\n\n"
        "Per **worker**-hour, whatever the connections it holds, in on-demand request units at "
        f"us-east-1 list prices (${WRITE_PRICE_PER_MILLION} per million writes, "
        f"${READ_PRICE_PER_MILLION} per million reads; check your region). A heartbeat renews "
        f"the worker session: one conditional UpdateItem ({WRU_PER_RENEWAL} WRU). A STOP check "
        "is one Query of the sparse stops-by-owner index (0.5 RRU). The lease length costs "
        "nothing; it sets how long a crashed worker's connections wait (keep it at least 3 "
        "heartbeats plus the self-fence margin).\n\n"
        "| Heartbeat | STOP check | WRU/h | RRU/h | $ per worker-hour | $ per worker-month |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        + "".join(rows)
        + "\nPer connection: one checkpoint write per `WSFLEET_CHECKPOINT_INTERVAL_S` (1 WRU an "
        "hour by default) and the ownership changes (a transaction of about 4-8 WRU per "
        "acquire, takeover, release or STOP). Not included: messages (1 WRU per message under "
        "1 KB, through the default sink), reconciliation (a Scan of the sessions table and a "
        "few index queries per worker per lease, not per connection), SQS and CloudWatch. "
        "docs/deploy.md has the whole table.\n"
    )
