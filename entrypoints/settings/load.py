"""Settings: parsed once from the environment, typed, validated, immutable.

Every problem is collected and reported together, each line naming the variable and what it
allows, so an operator fixes a task definition in one round instead of one error per deploy.
"""

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any

import attrs

from application.config import WorkerConfig
from application.errors import ConfigurationError
from entrypoints.settings.table import BY_NAME, PREFIX, SETTINGS, Setting


class SettingsError(ConfigurationError):
    """One or more environment variables are invalid; `problems` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        noun = "problem" if len(problems) == 1 else "problems"
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid configuration ({len(problems)} {noun}):\n{lines}")


@attrs.frozen
class Settings:
    """The process's configuration (see entrypoints/settings/table.py for every meaning)."""

    backend: str
    data_dir: str
    log_level: str
    service_name: str
    health_host: str
    health_port: int
    gc_thresholds: str
    api_host: str
    api_port: int
    api_allowed_hosts: tuple[str, ...]
    api_token: str | None = attrs.field(repr=False)  # a secret: never in a repr or a log
    api_max_connections: int
    region: str | None
    aws_endpoint_url: str | None
    dynamodb_endpoint_url: str | None
    connections_table: str
    events_table: str
    messages_table: str
    sessions_table: str
    queue_url: str | None
    postgres_url: str | None = attrs.field(repr=False)  # may hold a password: never shown
    postgres_listen_url: str | None = attrs.field(repr=False)
    postgres_pool_size: int
    postgres_prepared_statements: bool
    orphan_shards: int
    aws_max_attempts: int
    aws_connect_timeout_s: float
    aws_read_timeout_s: float
    metrics_namespace: str
    hint_visibility_timeout_s: int
    message_retention_days: int | None
    allowed_upstream_hosts: tuple[str, ...]
    allow_private_upstreams: bool
    message_sink: str | None
    kinesis_stream: str | None
    upstream_hook: str | None
    upstream_resume_param: str | None
    upstream_seq_field: str
    upstream_data_field: str | None
    upstream_open_timeout_s: float
    upstream_ping_interval_s: float
    upstream_ping_timeout_s: float
    upstream_max_message_bytes: int | None
    upstream_ca_file: str | None
    upstream_tls_read_buffer_bytes: int
    chaos_control: str | None  # tests/chaos only
    worker_id: str | None
    worker_cluster_arn: str | None
    worker_service: str | None
    worker: WorkerConfig


def load_settings(environ: Mapping[str, str] | None = None, *, aws: bool | None = None) -> Settings:
    """Parse `environ` (default: os.environ). `aws=True` also requires what the AWS backend
    needs (the Lambda router); by default that follows WSFLEET_BACKEND. An empty variable counts
    as unset. Raises SettingsError."""
    env = os.environ if environ is None else environ
    problems = _unknown_variables(env)
    values: dict[str, Any] = {}
    worker: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = env.get(setting.name, "")
        value = setting.default
        if raw.strip():
            try:
                value = setting.kind.parse(raw.strip())
            except ValueError as exc:
                shown = "(hidden)" if setting.secret else _show(raw)
                problems.append(f"{setting.name}={shown}: {exc}")
                continue
            problems += _field_problems(setting, value, raw)
        (worker if setting.worker_config else values)[setting.field] = value
    if problems:
        raise SettingsError(problems)
    if PREFIX + "CHECKPOINT_INTERVAL_S" not in env and _sink_without_resume_point(values):
        worker["checkpoint_interval_s"] = CHECKPOINT_WITHOUT_RESUME_POINT_S
    if PREFIX + "INGEST_WRITERS" not in env and _dynamodb_sink(values):
        worker["ingest_writers"] = DYNAMODB_SINK_WRITERS
    settings = Settings(**values, worker=_worker_config(worker))
    if problems := _sink_problems(settings) + _postgres_problems(settings):
        raise SettingsError(problems)
    if aws or (aws is None and settings.backend == "aws"):
        _require_aws(settings, env)
    return settings


# A sink that cannot say what it stored (Kinesis, a sink of your own) is resumed from the
# checkpoint recorded with the connection, so after a crash the upstream is asked for
# everything since. Upstreams typically keep a replay buffer of a minute or more; half a minute
# keeps the ask inside it, for 1 WRU per connection per checkpoint (120 per connection-hour).
# With a sink that reports its resume point the hourly default stands (docs/deploy.md).
CHECKPOINT_WITHOUT_RESUME_POINT_S = 30.0


# DynamoDB Local answers a batch of 100 (four BatchWriteItem requests side by side) in about
# 57 ms: one batch in flight stored at most ~1,750 messages/s. Four lanes keep four in flight
# (bench/RESULTS.md section 20); other sinks keep one, for the fullest batches.
DYNAMODB_SINK_WRITERS = 4


def _dynamodb_sink(values: Mapping[str, Any]) -> bool:
    sink = values.get("message_sink")
    return values.get("backend") == "aws" and sink in (None, "dynamodb")


def _sink_without_resume_point(values: Mapping[str, Any]) -> bool:
    sink = values.get("message_sink")
    return sink is not None and (sink == "kinesis" or ":" in sink)


# The built-in sinks each backend can run, its default first: the embedded backend has no AWS
# clients, and a SQLite file cannot be shared by the workers of several hosts.
SINKS_OF_BACKEND = {
    "embedded": ("sqlite",),
    "aws": ("dynamodb", "kinesis"),
    "postgres": ("postgres",),
}


def _postgres_problems(settings: Settings) -> list[str]:
    """The URL is the postgres backend's alone: set with another backend it would be ignored,
    which is more likely a mistake than a wish."""
    if settings.backend == "postgres" and not settings.postgres_url:
        return [
            f"{PREFIX}POSTGRES_URL: required when {PREFIX}BACKEND=postgres (a libpq URI, "
            "postgresql://user@host:5432/database)"
        ]
    if settings.backend != "postgres":
        return [
            f"{PREFIX}{name}=(hidden): only read with {PREFIX}BACKEND=postgres, "
            f"not {settings.backend}"
            for name, value in (
                ("POSTGRES_URL", settings.postgres_url),
                ("POSTGRES_LISTEN_URL", settings.postgres_listen_url),
            )
            if value
        ]
    return []


def _sink_problems(settings: Settings) -> list[str]:
    sink = settings.message_sink
    if sink is None or ":" in sink:
        return []
    problems = []
    if sink not in SINKS_OF_BACKEND[settings.backend]:
        problems.append(
            f"{PREFIX}MESSAGE_SINK={sink}: not with {PREFIX}BACKEND={settings.backend} (it runs "
            f"{' or '.join(SINKS_OF_BACKEND[settings.backend])}, or a sink of your own)"
        )
    if sink == "kinesis" and not settings.kinesis_stream:
        problems.append(
            f"{PREFIX}KINESIS_STREAM: required when {PREFIX}MESSAGE_SINK=kinesis "
            "(the stream's name or ARN)"
        )
    return problems


def _field_problems(setting: Setting, value: Any, raw: str) -> list[str]:
    """WorkerConfig's own validators, per field, so the message names the variable."""
    if not setting.worker_config:
        return []
    attribute = getattr(attrs.fields(WorkerConfig), setting.field)
    if attribute.validator is None:
        return []
    try:
        attribute.validator(None, attribute, value)
    except (ConfigurationError, ValueError, TypeError) as exc:
        return [f"{setting.name}={_show(raw)}: {exc}"]
    return []


def _worker_config(fields: dict[str, Any]) -> WorkerConfig:
    """Cross-field rules (heartbeat vs lease) are WorkerConfig's; say them in variable names."""
    try:
        return WorkerConfig(**fields)
    except (ConfigurationError, ValueError) as exc:
        message = str(exc)
        for setting in SETTINGS:
            if setting.worker_config:
                message = re.sub(rf"\b{setting.field}\b", setting.name, message)
        raise SettingsError([message]) from exc


def _require_aws(settings: Settings, env: Mapping[str, str]) -> None:
    problems = []
    if not settings.queue_url:
        problems.append(f"{PREFIX}QUEUE_URL: required when the backend is aws (an SQS URL)")
    # The SDK may still find a region in a profile (~/.aws/config); that reads no network.
    configured = settings.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not configured and not _profile_region():
        problems.append(
            f"{PREFIX}REGION: required when the backend is aws and no AWS_REGION, "
            "AWS_DEFAULT_REGION or profile region is set"
        )
    if problems:
        raise SettingsError(problems)


def _profile_region() -> str | None:
    """The region of the AWS profile, if any; botocore imported only then (it costs the
    commands that never get here a tenth of a second)."""
    import botocore.session

    region: str | None = botocore.session.Session().get_config_variable("region")
    return region


def _unknown_variables(env: Mapping[str, str]) -> list[str]:
    problems = []
    for name in sorted(n for n in env if n.startswith(PREFIX) and n not in BY_NAME):
        close = difflib.get_close_matches(name, list(BY_NAME), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        problems.append(f"{name}: unknown variable{hint} (see docs/settings.md)")
    return problems


def _show(raw: str) -> str:
    return repr(raw if len(raw) <= 80 else raw[:77] + "...")
