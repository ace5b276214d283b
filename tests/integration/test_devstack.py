"""The dev stack's choice of DynamoDB engine: DynamoDB Local where it can run, otherwise moto
with its lock, and a fallback that is always named (never silent)."""

import threading
from pathlib import Path

import attrs
import pytest

from adapters.dynamodb.schema import TableNames
from entrypoints.devstack import dynamodb_local
from entrypoints.devstack.aws import LocalAws, borrow, lend, local_aws
from entrypoints.devstack.service import ServiceError
from entrypoints.local_aws import provision
from tests.support import aws as support
from tests.support.dynamodb import dynamodb_client


def test_a_missing_install_is_named_with_how_to_get_it(tmp_path: Path) -> None:
    reason = dynamodb_local.locate(tmp_path)
    assert isinstance(reason, str)
    assert "make dynamodb-local" in reason or "java is not installed" in reason


def test_without_dynamodb_local_moto_serves_dynamodb_and_says_why(tmp_path: Path) -> None:
    with local_aws(tmp_path, engine="moto") as aws:
        assert not aws.on_dynamodb_local
        assert aws.dynamodb_url == aws.moto_url
        assert aws.fallback == "DEVSTACK_DYNAMODB=moto"
        assert "NOT DynamoDB Local" in aws.describe()
        log = (tmp_path / "moto.log").read_text()
        assert "listening on" in log


def test_asking_for_dynamodb_local_where_it_cannot_run_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dynamodb_local, "INSTALL_DIR", tmp_path / "nowhere")
    with pytest.raises(ServiceError, match="dynamodb-local"), local_aws(tmp_path, "dynamodb-local"):
        pass


def test_lent_stacks_go_to_one_borrower_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stacks = [LocalAws(f"http://moto-{i}", f"http://ddb-{i}", "DynamoDB Local") for i in (0, 1)]
    monkeypatch.setenv(*lend(stacks, tmp_path).popitem())
    released = threading.Event()
    third: list[tuple[LocalAws | None, bool]] = []

    def borrow_third() -> None:
        with borrow(poll_s=0.01) as aws:
            third.append((aws, released.is_set()))

    with borrow() as first:
        with borrow() as second:
            assert [first, second] == stacks
            waiter = threading.Thread(target=borrow_third)
            waiter.start()
            waiter.join(0.2)
            released.set()
        waiter.join(10)
    assert third == [(stacks[1], True)]  # it waited for the second to come back


def test_nothing_lent_borrows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEVSTACK_LENT_AWS", raising=False)
    with borrow() as aws:
        assert aws is None


def test_the_session_summary_warns_loudly_when_moto_served_dynamodb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fallback = LocalAws("http://m", "http://m", "moto", fallback="java is not installed")
    monkeypatch.setattr(support, "STARTED", [fallback])
    lines = support.summary_lines()
    assert all(line.startswith("WARNING") for line in lines)
    assert any("did NOT run on DynamoDB Local" in line for line in lines)
    assert any("java is not installed" in line for line in lines)


async def test_local_aws_provisions_tables_on_dynamodb_local_and_the_queue_on_moto(
    aws: LocalAws,
) -> None:
    env = await provision(aws.moto_url, aws.region, "provisioned-hints", aws.dynamodb_url)
    assert env["WSFLEET_DYNAMODB_ENDPOINT_URL"] == aws.dynamodb_url
    assert env["WSFLEET_QUEUE_URL"].endswith("/provisioned-hints")
    async with dynamodb_client(aws) as client:
        tables = (await client.list_tables())["TableNames"]
    assert set(attrs.astuple(TableNames())) <= set(tables)
