"""Every environment variable wsfleet reads, as data: name, kind, default, meaning, users.

This table is the single source of truth: the loader parses it, docs/settings.md is generated
from it (a test keeps them equal) and the infra checks compare Terraform's variables with it.
Worker timings come from `WorkerConfig` so their defaults cannot drift from the code.
"""

from typing import Any

import attrs

from adapters.cloudwatch.schema import DEFAULT_NAMESPACE
from adapters.dynamodb import schema
from adapters.postgres.defaults import DEFAULT_POOL_SIZE
from adapters.sqs.schema import MAX_VISIBILITY_TIMEOUT_S
from adapters.websocket.options import (
    MAX_TLS_READ_BUFFER,
    MIN_TLS_READ_BUFFER,
    WebSocketOptions,
)
from application.config import WorkerConfig
from entrypoints.backends import NAMES as BACKEND_NAMES
from entrypoints.settings.kinds import (
    Choice,
    Flag,
    HttpUrl,
    ImportRef,
    Kind,
    Names,
    Number,
    OrNone,
    PostgresUrl,
    SinkRef,
    Text,
)

PREFIX = "WSFLEET_"
ROUTER = "router"  # the Lambda event router (and the local API)
WORKER = "worker"  # the worker process
BOTH = frozenset({ROUTER, WORKER})
UNDOCUMENTED = "(undocumented)"


@attrs.frozen
class Setting:
    name: str  # the environment variable
    field: str  # the attribute of Settings, or of WorkerConfig for worker timings
    kind: Kind
    default: Any  # typed; None means unset
    meaning: str
    used_by: frozenset[str] = frozenset({WORKER})
    worker_config: bool = False  # True: a WorkerConfig field
    secret: bool = False  # True: its value is never echoed (start-up errors say "(hidden)")


# Not SQS's 30 s default: see the meaning of WSFLEET_HINT_VISIBILITY_TIMEOUT_S below.
HINT_VISIBILITY_TIMEOUT_S = 5
_TABLE_NAME = Text(r"[A-Za-z0-9_.-]{3,255}", "DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -)")
# A stream name (1-128 of A-Z a-z 0-9 _ . -) or its ARN.
_KINESIS_STREAM = Text(
    r"[A-Za-z0-9_.-]{1,128}|arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream/[A-Za-z0-9_.-]{1,128}",
    "Kinesis stream name or ARN",
)
_HOST = Text(
    r"\.?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*",
    "host name, or .suffix",
)
_NAME = Text(r"[A-Za-z0-9_./:-]{1,255}", "1-255 of A-Z a-z 0-9 _ . / : -")
_SECONDS = Number(integer=False, above=0)


def _s(
    name: str,
    field: str,
    kind: Kind,
    default: Any,
    meaning: str,
    used_by: frozenset[str] = frozenset({WORKER}),
    secret: bool = False,
) -> Setting:
    return Setting(PREFIX + name, field, kind, default, meaning, used_by, secret=secret)


_PROCESS = (
    _s(
        "BACKEND",
        "backend",
        Choice(*BACKEND_NAMES),
        "embedded",
        "Where state lives: `embedded` (SQLite files under WSFLEET_DATA_DIR, one host), `aws` "
        "(DynamoDB, SQS, CloudWatch) or `postgres` (one PostgreSQL database, "
        "WSFLEET_POSTGRES_URL, for a fleet on any hosts). The Lambda router always uses `aws`.",
    ),
    _s(
        "DATA_DIR",
        "data_dir",
        Text(r".{1,4096}", "a directory path"),
        ".wsfleet",
        "Directory of the embedded backend's database files.",
    ),
    _s(
        "LOG_LEVEL",
        "log_level",
        Choice("DEBUG", "INFO", "WARNING", "ERROR"),
        "INFO",
        "Level of wsfleet's JSON log lines (botocore and websockets log at WARNING).",
        BOTH,
    ),
    _s(
        "SERVICE_NAME",
        "service_name",
        _NAME,
        "wsfleet",
        "Service name: the `ServiceName` metric dimension the ECS autoscaling policy tracks, "
        "and a field of every log line.",
        BOTH,
    ),
    _s(
        "HEALTH_HOST",
        "health_host",
        Text(r"[0-9A-Za-z.:-]{1,255}", "an address to bind"),
        "127.0.0.1",
        "Address of the worker's health endpoint (`/healthz`, `/status`, `/metrics`); the ECS "
        "health check runs inside the container, so loopback suffices; a Prometheus on another "
        "host needs an address it can reach (0.0.0.0).",
    ),
    _s(
        "HEALTH_PORT",
        "health_port",
        Number(integer=True, minimum=0, maximum=65535),
        8080,
        "Port of the worker's health endpoint; 0 disables it.",
    ),
    _s(
        "GC_THRESHOLDS",
        "gc_thresholds",
        Text(
            r"python|[1-9]\d{0,6},[1-9]\d{0,4},[1-9]\d{0,4}",
            "gen0,gen1,gen2 (positive integers), or python",
        ),
        "50000,20,100",
        "The worker's CPython garbage-collector thresholds (`gc.set_threshold`); `python` keeps "
        "CPython's 700,10,10. With thousands of connections those ran the young collections "
        "about 50 times a second and stopped the event loop for up to 0.6 s in full ones "
        "(bench/RESULTS.md); reference counting still frees almost everything at once.",
    ),
    _s(
        "WORKER_ID",
        "worker_id",
        OrNone(
            Text(
                r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}",
                "1-128 of A-Z a-z 0-9 . _ - (first a letter or digit)",
            )
        ),
        None,
        "The worker's id, chosen by whoever starts it (`wsfleet fleet`, a systemd unit) so that "
        "it can end the worker's sessions the moment the process is gone "
        "(`wsfleet end-session --worker`). Must be new for every process start: a restarted "
        "worker must never reuse its predecessor's id. A worker that finds a live session under "
        "its id (another worker runs under it) refuses to start (exit 2). Unset: `<ECS task id "
        "or host name>-<8 random hex>`.",
    ),
    _s(
        "WORKER_CLUSTER_ARN",
        "worker_cluster_arn",
        OrNone(
            Text(
                r"arn:[A-Za-z0-9-]+:ecs:[A-Za-z0-9-]+:\d{12}:cluster/[A-Za-z0-9_-]{1,255}",
                "an ECS cluster ARN",
            )
        ),
        None,
        "The deaths Lambda (entrypoints/lambda_deaths): the cluster of the worker service, whose "
        "STOPPED tasks' sessions it ends; events about any other cluster are ignored.",
        frozenset({ROUTER}),
    ),
    _s(
        "WORKER_SERVICE",
        "worker_service",
        OrNone(Text(r"[A-Za-z0-9_-]{1,255}", "an ECS service name")),
        None,
        "The deaths Lambda: the worker service's name (the task's group is `service:<name>`); "
        "tasks of any other service are ignored.",
        frozenset({ROUTER}),
    ),
    _s(
        "API_HOST",
        "api_host",
        Text(r"[0-9A-Za-z.:-]{1,255}", "an address to bind"),
        "127.0.0.1",
        "Address the local event API (`wsfleet api`) listens on; the Lambda router ignores it. "
        "Anything but a loopback address (0.0.0.0, a LAN address) requires WSFLEET_API_TOKEN: "
        "without one the API refuses to start (exit 2).",
        frozenset({ROUTER}),
    ),
    _s(
        "API_PORT",
        "api_port",
        Number(integer=True, minimum=0, maximum=65535),
        8000,
        "Port of the local event API (`wsfleet api`); 0 picks a free one (printed at start).",
        frozenset({ROUTER}),
    ),
    _s(
        "API_ALLOWED_HOSTS",
        "api_allowed_hosts",
        Names(Text(r"[0-9A-Za-z.:\[\]-]{1,255}", "host name or address")),
        (),
        "Host names the local event API answers besides its bound address, `localhost`, "
        "`127.0.0.1` and `[::1]` (the `Host` header, port ignored); any other is refused 421, "
        "so a web page cannot reach the API through DNS rebinding. The Lambda router ignores it.",
        frozenset({ROUTER}),
    ),
    _s(
        "API_TOKEN",
        "api_token",
        OrNone(Text(r"[!-~]{16,256}", "16-256 printable characters, no spaces")),
        None,
        "If set, the local event API requires `Authorization: Bearer <token>` on every request "
        "(401 otherwise; compared in constant time). The Lambda router ignores it (API Gateway "
        "checks IAM). Never shown in errors or logs.",
        frozenset({ROUTER}),
        secret=True,
    ),
    _s(
        "API_MAX_CONNECTIONS",
        "api_max_connections",
        Number(integer=True, minimum=1, maximum=10000),
        64,
        "Sockets the local event API holds open at once. One that arrives at the cap closes the "
        "oldest socket that has not yet sent its request (idle sockets give way); only when "
        "every socket is inside a request is the newcomer closed. A client must send its "
        "request head within 5 s of connecting, and its body within 5 s more (408).",
        frozenset({ROUTER}),
    ),
)

_AWS = (
    _s(
        "REGION",
        "region",
        Text(r"[a-z]{2}(-[a-z]+)+-\d", "an AWS region such as eu-west-1"),
        None,
        "AWS region; unset: the SDK's default (AWS_REGION, AWS_DEFAULT_REGION).",
        BOTH,
    ),
    _s(
        "AWS_ENDPOINT_URL",
        "aws_endpoint_url",
        HttpUrl(),
        None,
        "One endpoint for every AWS service, for a local emulator (moto server); unset on AWS.",
        BOTH,
    ),
    _s(
        "DYNAMODB_ENDPOINT_URL",
        "dynamodb_endpoint_url",
        HttpUrl(),
        None,
        "DynamoDB's endpoint alone, ahead of WSFLEET_AWS_ENDPOINT_URL: DynamoDB Local beside a "
        "moto server for SQS and CloudWatch (the demo, tests, benchmarks); unset on AWS.",
        BOTH,
    ),
    _s(
        "CONNECTIONS_TABLE",
        "connections_table",
        _TABLE_NAME,
        schema.DEFAULT_CONNECTIONS_TABLE,
        "DynamoDB table of connections and leases.",
        BOTH,
    ),
    _s(
        "EVENTS_TABLE",
        "events_table",
        _TABLE_NAME,
        schema.DEFAULT_EVENTS_TABLE,
        "DynamoDB table of the ownership event log.",
        BOTH,
    ),
    _s(
        "MESSAGES_TABLE",
        "messages_table",
        _TABLE_NAME,
        schema.DEFAULT_MESSAGES_TABLE,
        "DynamoDB table of upstream messages (the default message sink).",
    ),
    _s(
        "SESSIONS_TABLE",
        "sessions_table",
        _TABLE_NAME,
        schema.DEFAULT_SESSIONS_TABLE,
        "DynamoDB table of worker sessions (one item per worker process, renewed on its "
        "heartbeat; a connection's lease lives as long as its owner's session).",
        BOTH,
    ),
    _s(
        "QUEUE_URL",
        "queue_url",
        HttpUrl(),
        None,
        "URL of the SQS notification queue; required when the backend is `aws`.",
        BOTH,
    ),
    _s(
        "ORPHAN_SHARDS",
        "orphan_shards",
        Number(integer=True, minimum=1, maximum=100),
        schema.DEFAULT_ORPHAN_SHARDS,
        "Partitions of the orphan index: each reconciliation pass reads every one (fewer is "
        "cheaper); ownership changes spread over them. Must be equal for the router and every "
        "worker.",
        BOTH,
    ),
    _s(
        "AWS_MAX_ATTEMPTS",
        "aws_max_attempts",
        Number(integer=True, minimum=1, maximum=10),
        3,
        "Attempts per AWS call, the first included (botocore `standard` retry mode, jittered "
        "back-off). A worker's session renewals are tried once each: the worker retries them "
        "itself within the lease.",
        BOTH,
    ),
    _s(
        "AWS_CONNECT_TIMEOUT_S",
        "aws_connect_timeout_s",
        _SECONDS,
        2.0,
        "Seconds to open a connection to an AWS endpoint.",
        BOTH,
    ),
    _s(
        "AWS_READ_TIMEOUT_S",
        "aws_read_timeout_s",
        _SECONDS,
        5.0,
        "Seconds to wait for an AWS response; SQS long polls get the poll wait on top. Short, "
        "so a stuck call fails within a lease instead of after botocore's 60 s.",
        BOTH,
    ),
    _s(
        "HINT_VISIBILITY_TIMEOUT_S",
        "hint_visibility_timeout_s",
        Number(integer=True, minimum=1, maximum=MAX_VISIBILITY_TIMEOUT_S),
        HINT_VISIBILITY_TIMEOUT_S,
        "Seconds a received hint stays invisible to other workers. Short on purpose: handling "
        "a hint takes one lease attempt, and a hint swallowed by a stopping worker's abandoned "
        "long poll (SQS finishes the receive server-side) reappears after this long.",
    ),
    _s(
        "MESSAGE_RETENTION_DAYS",
        "message_retention_days",
        OrNone(Number(integer=True, minimum=1)),
        None,
        "Days after which stored messages expire (DynamoDB TTL); unset keeps them.",
    ),
    _s("METRICS_NAMESPACE", "metrics_namespace", _NAME, DEFAULT_NAMESPACE, "CloudWatch namespace."),
)

_POSTGRES = (
    _s(
        "POSTGRES_URL",
        "postgres_url",
        PostgresUrl(),
        None,
        "The database of the `postgres` backend (required there, refused with any other): a "
        "libpq URI, `postgresql://user@host:5432/wsfleet?sslmode=verify-full`. The password "
        "comes from the URI, else from libpq's PGPASSWORD or PGPASSFILE (~/.pgpass), which the "
        "driver reads. Never shown in errors or logs. The hint queue LISTENs on a connection "
        "of its own to this URL. Create the tables with `wsfleet migrate`: a worker refuses a "
        "database without them (exit 2).",
        BOTH,
        secret=True,
    ),
    _s(
        "POSTGRES_LISTEN_URL",
        "postgres_listen_url",
        PostgresUrl(),
        None,
        "Where the hint queue's LISTEN connection goes, when not to WSFLEET_POSTGRES_URL: "
        "behind PgBouncer in transaction mode, which does not pass notifications on, the "
        "server itself (same database). Unset: WSFLEET_POSTGRES_URL. Without working "
        "notifications the queue still polls every second. A secret like the URL.",
        BOTH,
        secret=True,
    ),
    _s(
        "POSTGRES_POOL_SIZE",
        "postgres_pool_size",
        Number(integer=True, minimum=1, maximum=1000),
        DEFAULT_POOL_SIZE,
        "Database connections each process keeps (one pool per process, shared by the store, "
        "the hint queue and the sink), plus one for the worker session's renewals and one for the "
        "queue's LISTEN; every statement is "
        "short, so a few serve thousands of connections. The server's `max_connections` must "
        "cover every process's pool.",
        BOTH,
    ),
    _s(
        "POSTGRES_PREPARED_STATEMENTS",
        "postgres_prepared_statements",
        Flag(),
        True,
        "Cache prepared statements per database connection (asyncpg's statement cache). Set "
        "false behind PgBouncer in transaction mode older than 1.21, where a statement "
        "prepared on one server connection is missing on the next (docs/decisions.md).",
        BOTH,
    ),
)

_EXTENSIONS = (
    _s(
        "ALLOWED_UPSTREAM_HOSTS",
        "allowed_upstream_hosts",
        Names(_HOST),
        (),
        "If set, the only upstream hosts START may name (exact names, or `.suffix`).",
        BOTH,
    ),
    _s(
        "ALLOW_PRIVATE_UPSTREAMS",
        "allow_private_upstreams",
        Flag(),
        False,
        "Allow upstream URLs that resolve to loopback, private, link-local or multicast "
        "addresses. Only for local development and tests (SSRF).",
        BOTH,
    ),
    _s(
        "MESSAGE_SINK",
        "message_sink",
        SinkRef(),
        None,
        "Where messages are stored: `dynamodb` (the messages table; the aws backend's default), "
        "`sqlite` (messages.sqlite; the embedded default), `kinesis` (a Kinesis data stream, "
        "WSFLEET_KINESIS_STREAM; aws backend), `postgres` (the `messages` table of "
        "WSFLEET_POSTGRES_URL's database; the postgres default), or your own: a class or "
        "factory taking `settings` that returns a MessageSink (or an async context manager of "
        "one).",
    ),
    _s(
        "KINESIS_STREAM",
        "kinesis_stream",
        _KINESIS_STREAM,
        None,
        "The Kinesis data stream (name or ARN) of WSFLEET_MESSAGE_SINK=kinesis.",
    ),
    _s(
        "UPSTREAM_HOOK",
        "upstream_hook",
        ImportRef(),
        None,
        "Your upstream hook (auth headers, subscribe frame, seq extraction): a class or "
        "factory taking `settings` that returns an UpstreamHook.",
    ),
)

# Fault injection for chaos runs of real worker processes (tests/chaos). Never set in production.
_TESTING = (
    _s(
        "CHAOS_CONTROL",
        "chaos_control",
        Text(r".{1,4096}", "a file path"),
        None,
        "Test and chaos runs only, never in production: a JSON file the worker polls (every "
        "0.1 s) for store faults and clock skew to inject into itself (adapters/faults/"
        "control.py). Unset: no fault injector is wired at all.",
    ),
)

_WS = attrs.fields(WebSocketOptions)
_FIELD_NAME = Text(r"[A-Za-z0-9_.-]{1,64}", "1-64 of A-Z a-z 0-9 _ . -")
_UPSTREAM = (
    _s(
        "UPSTREAM_RESUME_PARAM",
        "upstream_resume_param",
        OrNone(Text(r"[A-Za-z0-9_.-]{1,64}", "a query parameter name")),
        _WS.resume_param.default,
        "Query parameter that asks the upstream to resume from a seq (`?from_seq=N`); `none` "
        "never adds one (then a new owner cannot resume exactly).",
    ),
    _s(
        "UPSTREAM_SEQ_FIELD",
        "upstream_seq_field",
        _FIELD_NAME,
        _WS.seq_field.default,
        "JSON field of each upstream message holding its seq (a hook can parse other formats).",
    ),
    _s(
        "UPSTREAM_DATA_FIELD",
        "upstream_data_field",
        _FIELD_NAME,
        _WS.data_field.default,
        "Unset, the whole upstream frame is stored (every field; the seq still read from its "
        "field). Set, only this JSON field is kept as the payload (the whole frame when a "
        "message has no such field): the other fields are dropped.",
    ),
    _s(
        "UPSTREAM_OPEN_TIMEOUT_S",
        "upstream_open_timeout_s",
        _SECONDS,
        _WS.open_timeout.default,
        "Seconds to open an upstream connection (TCP, TLS, WebSocket handshake).",
    ),
    _s(
        "UPSTREAM_PING_INTERVAL_S",
        "upstream_ping_interval_s",
        _SECONDS,
        _WS.ping_interval.default,
        "Seconds between keepalive pings to the upstream.",
    ),
    _s(
        "UPSTREAM_PING_TIMEOUT_S",
        "upstream_ping_timeout_s",
        _SECONDS,
        _WS.ping_timeout.default,
        "Seconds without a pong before the upstream connection counts as dropped.",
    ),
    _s(
        "UPSTREAM_MAX_MESSAGE_BYTES",
        "upstream_max_message_bytes",
        OrNone(Number(integer=True, minimum=1024)),
        None,
        "Largest upstream message accepted (unset: 1 MiB frames, and no message larger than "
        "the sink stores, 398,976 bytes on DynamoDB); a larger one is a rejected stream. "
        "Refused at start-up if above what the message sink stores.",
    ),
    _s(
        "UPSTREAM_CA_FILE",
        "upstream_ca_file",
        Text(r".{1,4096}", "a file path"),
        _WS.ca_file.default,
        "Extra CA bundle (PEM) for wss:// upstreams behind a private CA; verification is "
        "always on.",
    ),
    _s(
        "UPSTREAM_TLS_READ_BUFFER_BYTES",
        "upstream_tls_read_buffer_bytes",
        Number(integer=True, minimum=MIN_TLS_READ_BUFFER, maximum=MAX_TLS_READ_BUFFER),
        _WS.tls_read_buffer.default,
        "Bytes read from a wss:// socket at a time; each connection keeps a buffer this size "
        "for its life. The trade-off: memory per connection against reads per large message "
        "(a 1 MiB message takes 256 reads at 4 KiB, 4 at asyncio's own 262144, which costs "
        "256 KiB per connection). Ignored for ws:// and behind an HTTP/SOCKS proxy.",
    ),
)

_WORKER_MEANINGS: dict[str, tuple[Kind, str]] = {
    "lease_ms": (
        Number(integer=True, minimum=1000),
        "The worker session's lease in ms: a crashed worker's connections are taken over "
        "after this.",
    ),
    "heartbeat_interval_s": (
        _SECONDS,
        "Seconds between renewals of the worker session (one write per worker, whatever it holds).",
    ),
    "self_fence_margin_ms": (
        Number(integer=True, minimum=1),
        "A worker stops streaming this long before its session could expire "
        "without a renewal (clock skew, stuck calls).",
    ),
    "desired_state_interval_s": (
        _SECONDS,
        "Seconds between checks for STOP of held connections (one indexed read per worker).",
    ),
    "checkpoint_interval_s": (
        _SECONDS,
        "Seconds between checkpoint writes of each streaming connection (plus one on every "
        "release). Unset: 3,600, or 30 with a sink that cannot report what it stored "
        "(kinesis, a sink of your own), so a takeover asks the upstream for at most ~30 s back.",
    ),
    "reconcile_interval_s": (
        _SECONDS,
        "Mean pause between orphan scans, each drawn within +/-10 % so a fleet started together"
        " does not scan in step (they also run when the next lease can expire).",
    ),
    "reconcile_jitter_s": (
        Number(integer=False, minimum=0),
        "Random delay added to scans so the fleet does not query in step.",
    ),
    "reconcile_page_size": (Number(integer=True, minimum=1), "Orphans read per index query."),
    "max_connections": (Number(integer=True, minimum=1), "Connections one worker holds at most."),
    "take_concurrency": (
        Number(integer=True, minimum=1),
        "The most lease acquisitions one worker has in flight at once per loop (hints, "
        "reconciliation); it starts at one and doubles while the store answers fast.",
    ),
    "poll_wait_s": (Number(integer=False, above=0, maximum=20), "SQS long-poll wait in seconds."),
    "poll_batch": (Number(integer=True, minimum=1, maximum=10), "Hints received per poll."),
    "poll_concurrency": (
        Number(integer=True, minimum=1, maximum=10),
        "Hint receivers a worker runs while the queue has a backlog (a receive came back "
        "full) and its room would fill each one's batch (a newcomer taking a deploy wave's "
        "hints); otherwise one long poll.",
    ),
    "capacity_pause_s": (_SECONDS, "Pause of the hint loop while the worker is full."),
    "shutdown_budget_s": (
        _SECONDS,
        "Graceful shutdown deadline after SIGTERM; keep it below ECS `stopTimeout` (default 30 s).",
    ),
    "reconnect_base_s": (_SECONDS, "First upstream reconnect delay (doubles, jittered)."),
    "reconnect_max_s": (_SECONDS, "Longest upstream reconnect delay."),
    "reconnect_attempts": (
        Number(integer=True, minimum=1),
        "Reconnects before the worker gives a failing connection up.",
    ),
    "poison_backoff_base_s": (
        _SECONDS,
        "How long a given-up connection rests before anyone retries it (grows with each failure).",
    ),
    "poison_backoff_max_s": (_SECONDS, "Longest rest of a failing connection."),
    "upstream_healthy_s": (
        _SECONDS,
        "How long an upstream must stream (after its first stored message) before a later "
        "failure counts as the first again; shorter sessions grow the back-off.",
    ),
    "ingest_buffer_messages": (
        Number(integer=True, minimum=1),
        "Messages buffered per connection before reading pauses (back-pressure).",
    ),
    "ingest_buffer_bytes": (
        Number(integer=True, minimum=1),
        "Bytes of messages (in memory) buffered per connection before reading pauses; one "
        "message larger than this is still taken when the buffer is empty.",
    ),
    "ingest_flush_interval_s": (_SECONDS, "Longest wait before buffered messages are written."),
    "ingest_writers": (
        Number(integer=True, minimum=1, maximum=64),
        "Sink writes in flight at once, each for its own share of the connections (a "
        "connection's messages stay in order). Unset: 4 with the DynamoDB sink (its requests "
        "take tens of ms), else 1 (fewer, fuller batches).",
    ),
    "seq_jump_window": (
        Number(integer=True, minimum=1),
        "Largest forward seq jump taken as messages lost upstream; a larger one is an upstream "
        "fault (the connection backs off), never a new checkpoint.",
    ),
    "metrics_interval_s": (_SECONDS, "Seconds between metric publications."),
    "balance": (
        Flag(),
        "Workers converge on even shares: one above its share by more than a band (10 %, at "
        "least one connection) hands the excess off gracefully (drain, release, hint); one "
        "below it takes. Off: no worker hands off to balance (new workers get only new and "
        "orphaned connections).",
    ),
    "balance_handoffs_per_pass": (
        Number(integer=True, minimum=1),
        "The most connections a worker hands off to balance per look at the fleet (about "
        "once a session lease).",
    ),
    "join_grace_s": (
        Number(integer=False, minimum=0),
        "Seconds after a worker's session opens during which nobody hands it connections to "
        "balance; it takes its share of new, orphaned and leaving workers' connections. Set it "
        "above a rolling deploy's start-to-SIGTERM time, so each connection moves once. 0: "
        "balance toward a new worker at once.",
    ),
    "balance_by": (
        Choice("count", "load"),
        "What balancing evens out: `count`, connections; `load`, connections weighted by what "
        "they receive (each weighs 1 plus its messages a second, smoothed over 30 s and "
        "reported with the heartbeat), so one hot feed is not counted as one quiet one.",
    ),
}


def _worker_rows() -> tuple[Setting, ...]:
    rows = []
    for field in attrs.fields(WorkerConfig):
        # A new WorkerConfig field gets a plain kind until documented above (a test insists).
        fallback = (Number(integer=field.type is int), UNDOCUMENTED)
        kind, meaning = _WORKER_MEANINGS.get(field.name, fallback)
        rows.append(
            Setting(
                PREFIX + field.name.upper(),
                field.name,
                kind,
                field.default,
                meaning,
                frozenset({WORKER}),
                worker_config=True,
            )
        )
    return tuple(rows)


GROUPS: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    ("Process", _PROCESS),
    ("AWS", _AWS),
    ("PostgreSQL", _POSTGRES),
    ("Upstream policy and extension points", _EXTENSIONS),
    ("Upstream connections", _UPSTREAM),
    ("Worker timings and limits", _worker_rows()),
    ("Testing only", _TESTING),
)
SETTINGS: tuple[Setting, ...] = tuple(s for _, group in GROUPS for s in group)
# The settings a user sets (where state lives, what to connect to, how to reach the API);
# every other one is a tuning knob, listed under "Advanced" in docs/settings.md and still
# validated by name like these.
ESSENTIAL: frozenset[str] = frozenset(
    PREFIX + name
    for name in (
        "BACKEND",
        "DATA_DIR",
        "LOG_LEVEL",
        "WORKER_ID",
        "HEALTH_PORT",
        "API_HOST",
        "API_PORT",
        "API_TOKEN",
        "REGION",
        "CONNECTIONS_TABLE",
        "EVENTS_TABLE",
        "MESSAGES_TABLE",
        "SESSIONS_TABLE",
        "QUEUE_URL",
        "POSTGRES_URL",
        "ALLOWED_UPSTREAM_HOSTS",
        "ALLOW_PRIVATE_UPSTREAMS",
        "MESSAGE_SINK",
        "KINESIS_STREAM",
        "UPSTREAM_HOOK",
        "UPSTREAM_RESUME_PARAM",
        "UPSTREAM_SEQ_FIELD",
        "UPSTREAM_DATA_FIELD",
        "MAX_CONNECTIONS",
        "LEASE_MS",
        "SHUTDOWN_BUDGET_S",
    )
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
