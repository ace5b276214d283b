"""Settings: the table is the single source of truth, every value is validated at start-up,
and every refusal names the variable and what it allows."""

from pathlib import Path

import attrs
import pytest

from application.config import WorkerConfig
from entrypoints.settings import SETTINGS, Settings, SettingsError, load_settings
from entrypoints.settings.markdown import render
from entrypoints.settings.table import UNDOCUMENTED

DOCS = Path(__file__).parents[2] / "docs" / "settings.md"
AWS = {"WSFLEET_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/q", "AWS_REGION": "eu-west-1"}


def problems_of(env: dict[str, str], aws: bool | None = None) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings(env, aws=aws)
    return caught.value.problems


def test_docs_settings_md_is_generated_from_the_table() -> None:
    assert DOCS.read_text() == render(), (
        "docs/settings.md is stale: run `.venv/bin/python -m entrypoints.settings > "
        "docs/settings.md`"
    )


def test_every_setting_in_the_docs_table_names_its_variable_default_and_meaning() -> None:
    text = DOCS.read_text()
    for setting in SETTINGS:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{setting.name}`"))
        assert setting.kind.describe() in row.replace("\\|", "|")
        assert setting.meaning.split("`")[0][:30] in row


def test_table_and_settings_class_cover_each_other_exactly() -> None:
    table = {s.field for s in SETTINGS if not s.worker_config}
    fields = {f.name for f in attrs.fields(Settings)} - {"worker"}
    assert table == fields
    assert {s.field for s in SETTINGS if s.worker_config} == {
        f.name for f in attrs.fields(WorkerConfig)
    }


def test_every_variable_is_prefixed_unique_and_documented() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    assert all(n.startswith("WSFLEET_") and n == n.upper() for n in names)
    assert [s.name for s in SETTINGS if s.meaning == UNDOCUMENTED] == []


def test_defaults_are_the_worker_configs_and_an_empty_variable_counts_as_unset() -> None:
    settings = load_settings({"WSFLEET_LEASE_MS": "", "WSFLEET_LOG_LEVEL": "  "})
    assert settings.worker == WorkerConfig()
    assert settings.log_level == "INFO"
    assert settings.backend == "embedded"


def test_values_are_parsed_into_their_types() -> None:
    settings = load_settings(
        {
            **AWS,
            "WSFLEET_BACKEND": "AWS",
            "WSFLEET_LEASE_MS": "30000",
            "WSFLEET_HEARTBEAT_INTERVAL_S": "2.5",
            "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "Yes",
            "WSFLEET_ALLOWED_UPSTREAM_HOSTS": "feeds.example.com, .example.org,",
            "WSFLEET_UPSTREAM_RESUME_PARAM": "none",
            "WSFLEET_MESSAGE_RETENTION_DAYS": "7",
            "WSFLEET_LOG_LEVEL": "debug",
        }
    )
    assert settings.backend == "aws"
    assert settings.worker.lease_ms == 30_000
    assert settings.worker.heartbeat_interval_s == 2.5
    assert settings.allow_private_upstreams is True
    assert settings.allowed_upstream_hosts == ("feeds.example.com", ".example.org")
    assert settings.upstream_resume_param is None
    assert settings.message_retention_days == 7
    assert settings.log_level == "DEBUG"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("WSFLEET_LEASE_MS", "20s", "WSFLEET_LEASE_MS='20s': expected integer >= 1000"),
        ("WSFLEET_LEASE_MS", "500", "WSFLEET_LEASE_MS='500': expected integer >= 1000"),
        ("WSFLEET_HEARTBEAT_INTERVAL_S", "nan", "expected number > 0"),
        ("WSFLEET_POLL_BATCH", "11", "WSFLEET_POLL_BATCH='11': expected integer 1..10"),
        ("WSFLEET_BACKEND", "gcp", "WSFLEET_BACKEND='gcp': expected one of embedded, aws"),
        ("WSFLEET_ALLOW_PRIVATE_UPSTREAMS", "maybe", "expected true/false"),
        ("WSFLEET_AWS_ENDPOINT_URL", "localhost:4566", "expected http:// or https:// URL"),
        ("WSFLEET_CONNECTIONS_TABLE", "a b", "expected DynamoDB table name"),
        (
            "WSFLEET_MESSAGE_SINK",
            "my_sink.py",
            "expected dynamodb, sqlite, kinesis, postgres, or module:attribute",
        ),
        ("WSFLEET_HEALTH_PORT", "70000", "expected integer 0..65535"),
        ("WSFLEET_ALLOWED_UPSTREAM_HOSTS", "ok.com,bad host", "'bad host' is not"),
        ("WSFLEET_REGION", "Europe", "expected an AWS region"),
        ("WSFLEET_BALANCE_BY", "bytes", "expected one of count, load"),
    ],
)
def test_an_invalid_value_names_the_variable_and_what_is_allowed(
    name: str, value: str, expected: str
) -> None:
    [problem] = problems_of({name: value})
    assert problem.startswith(f"{name}=")
    assert expected in problem


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of(
        {"WSFLEET_LEASE_MS": "x", "WSFLEET_POLL_BATCH": "0", "WSFLEET_LEAS": "1"}
    )
    assert len(problems) == 3
    assert "did you mean WSFLEET_LEASE_MS?" in problems[0]


def test_cross_field_rules_are_reported_with_variable_names() -> None:
    [problem] = problems_of({"WSFLEET_LEASE_MS": "5000", "WSFLEET_HEARTBEAT_INTERVAL_S": "4"})
    assert problem.startswith("WSFLEET_HEARTBEAT_INTERVAL_S must be shorter than the lease")
    assert "heartbeat_interval_s" not in problem


def test_the_aws_backend_requires_a_queue_and_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    problems = problems_of({"WSFLEET_BACKEND": "aws"})
    assert problems[0].startswith("WSFLEET_QUEUE_URL: required")
    assert problems[1].startswith("WSFLEET_REGION: required")
    assert load_settings(AWS, aws=True).queue_url == AWS["WSFLEET_QUEUE_URL"]
    assert problems_of({}, aws=True)  # the router always runs on AWS


def test_error_message_lists_each_problem_on_its_own_line() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({"WSFLEET_LEASE_MS": "x", "WSFLEET_POLL_BATCH": "0"})
    assert str(caught.value).splitlines() == [
        "invalid configuration (2 problems):",
        "  WSFLEET_LEASE_MS='x': expected integer >= 1000",
        "  WSFLEET_POLL_BATCH='0': expected integer 1..10",
    ]


def test_the_api_token_is_never_echoed() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"WSFLEET_API_TOKEN": "tooshort-secret"})
    settings = load_settings({"WSFLEET_API_TOKEN": "long-enough-secret-value"})

    assert "WSFLEET_API_TOKEN=(hidden)" in str(refused.value)
    assert "tooshort-secret" not in str(refused.value)
    assert settings.api_token == "long-enough-secret-value"
    assert "long-enough-secret-value" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"WSFLEET_MESSAGE_SINK": "dynamodb"},
            "WSFLEET_MESSAGE_SINK=dynamodb: not with WSFLEET_BACKEND=embedded",
        ),
        (
            {"WSFLEET_MESSAGE_SINK": "kinesis"},
            "WSFLEET_MESSAGE_SINK=kinesis: not with WSFLEET_BACKEND=embedded",
        ),
        (
            {"WSFLEET_BACKEND": "aws", "WSFLEET_MESSAGE_SINK": "sqlite"},
            "WSFLEET_MESSAGE_SINK=sqlite: not with WSFLEET_BACKEND=aws",
        ),
        (
            {"WSFLEET_BACKEND": "aws", "WSFLEET_MESSAGE_SINK": "kinesis"},
            "WSFLEET_KINESIS_STREAM: required when WSFLEET_MESSAGE_SINK=kinesis",
        ),
        (
            {"WSFLEET_BACKEND": "aws", "WSFLEET_MESSAGE_SINK": "postgres"},
            "WSFLEET_MESSAGE_SINK=postgres: not with WSFLEET_BACKEND=aws",
        ),
        (
            {
                "WSFLEET_BACKEND": "postgres",
                "WSFLEET_POSTGRES_URL": "postgresql://h/db",
                "WSFLEET_MESSAGE_SINK": "sqlite",
            },
            "WSFLEET_MESSAGE_SINK=sqlite: not with WSFLEET_BACKEND=postgres",
        ),
    ],
)
def test_a_built_in_sink_the_backend_cannot_run_is_refused_by_name(
    env: dict[str, str], problem: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(env, aws=False)

    assert any(p.startswith(problem) for p in refused.value.problems), refused.value.problems


PG_URL = "postgresql://wsfleet:Pa55-word@db.internal:5432/fleet"


def test_the_postgres_backend_takes_its_url_pool_and_statement_cache() -> None:
    settings = load_settings(
        {
            "WSFLEET_BACKEND": "postgres",
            "WSFLEET_POSTGRES_URL": PG_URL,
            "WSFLEET_POSTGRES_POOL_SIZE": "4",
            "WSFLEET_POSTGRES_PREPARED_STATEMENTS": "false",
        }
    )

    assert (settings.backend, settings.postgres_url) == ("postgres", PG_URL)
    assert (settings.postgres_pool_size, settings.postgres_prepared_statements) == (4, False)
    assert "Pa55-word" not in repr(settings)
    assert load_settings({"WSFLEET_POSTGRES_URL": "postgres://h/db", "WSFLEET_BACKEND": "postgres"})


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"WSFLEET_BACKEND": "postgres"}, "WSFLEET_POSTGRES_URL: required when"),
        (
            {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": "mysql://u:Pa55-word@h/db"},
            "WSFLEET_POSTGRES_URL=(hidden): expected postgresql:// or postgres:// URI",
        ),
        (
            {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": "Pa55-word"},
            "WSFLEET_POSTGRES_URL=(hidden): expected postgresql:// or postgres:// URI",
        ),
        ({"WSFLEET_POSTGRES_URL": PG_URL}, "WSFLEET_POSTGRES_URL=(hidden): only read with"),
        (
            {"WSFLEET_POSTGRES_LISTEN_URL": PG_URL},
            "WSFLEET_POSTGRES_LISTEN_URL=(hidden): only read with",
        ),
        (
            {
                "WSFLEET_BACKEND": "postgres",
                "WSFLEET_POSTGRES_URL": PG_URL,
                "WSFLEET_POSTGRES_LISTEN_URL": "Pa55-word",
            },
            "WSFLEET_POSTGRES_LISTEN_URL=(hidden): expected postgresql://",
        ),
        (
            {
                "WSFLEET_BACKEND": "postgres",
                "WSFLEET_POSTGRES_URL": PG_URL,
                "WSFLEET_POSTGRES_POOL_SIZE": "0",
            },
            "WSFLEET_POSTGRES_POOL_SIZE='0': expected integer 1..1000",
        ),
    ],
)
def test_a_missing_or_malformed_postgres_url_is_refused_by_name_and_never_echoed(
    env: dict[str, str], problem: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(env)

    assert any(p.startswith(problem) for p in refused.value.problems), refused.value.problems
    assert "Pa55-word" not in str(refused.value)


def test_built_in_sinks_are_taken_by_name() -> None:
    aws = {"WSFLEET_BACKEND": "aws", "WSFLEET_MESSAGE_SINK": "kinesis"}
    settings = load_settings({**aws, "WSFLEET_KINESIS_STREAM": "feeds"}, aws=False)

    assert (settings.message_sink, settings.kinesis_stream) == ("kinesis", "feeds")
    assert load_settings({"WSFLEET_MESSAGE_SINK": "sqlite"}).message_sink == "sqlite"


def test_a_sink_without_a_resume_point_checkpoints_every_30_s_unless_told_otherwise() -> None:
    resumable = load_settings({"WSFLEET_MESSAGE_SINK": "sqlite"})
    own = load_settings({"WSFLEET_MESSAGE_SINK": "examples.file_sink:create"})
    told = load_settings(
        {
            "WSFLEET_MESSAGE_SINK": "examples.file_sink:create",
            "WSFLEET_CHECKPOINT_INTERVAL_S": "600",
        }
    )

    assert resumable.worker.checkpoint_interval_s == 3_600
    assert own.worker.checkpoint_interval_s == 30
    assert told.worker.checkpoint_interval_s == 600


def test_the_dynamodb_sink_writes_in_four_lanes_unless_told_otherwise() -> None:
    aws = {"WSFLEET_BACKEND": "aws"}

    assert load_settings(aws, aws=False).worker.ingest_writers == 4  # dynamodb by default
    dynamodb = {**aws, "WSFLEET_MESSAGE_SINK": "dynamodb"}
    assert load_settings(dynamodb, aws=False).worker.ingest_writers == 4
    kinesis = {**aws, "WSFLEET_MESSAGE_SINK": "kinesis", "WSFLEET_KINESIS_STREAM": "feeds"}
    assert load_settings(kinesis, aws=False).worker.ingest_writers == 1
    assert load_settings({}).worker.ingest_writers == 1  # embedded: SQLite
    told = {**aws, "WSFLEET_INGEST_WRITERS": "2"}
    assert load_settings(told, aws=False).worker.ingest_writers == 2


def test_the_settings_a_user_sets_are_named_in_the_table_and_listed_first() -> None:
    from entrypoints.settings.table import BY_NAME, ESSENTIAL

    assert BY_NAME.keys() >= ESSENTIAL, sorted(ESSENTIAL - BY_NAME.keys())
    docs = DOCS.read_text()
    advanced = docs.index("\n# Advanced\n")
    for name in ESSENTIAL:
        assert docs.index(f"| `{name}` |") < advanced, name
    for name in BY_NAME.keys() - ESSENTIAL:
        assert docs.index(f"| `{name}` |") > advanced, name
