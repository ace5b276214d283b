"""The backend switch as command-line flags, kept free of heavy imports so that `--help` and
usage errors answer at once.

Flags win over the environment: `--backend` (WSFLEET_BACKEND), `--data-dir`
(WSFLEET_DATA_DIR), `--endpoint-url` (WSFLEET_AWS_ENDPOINT_URL), `--dynamodb-endpoint-url`
(WSFLEET_DYNAMODB_ENDPOINT_URL), `--region` (WSFLEET_REGION),
`--queue-url` (WSFLEET_QUEUE_URL). They are written into a copy of the environment, which the
ordinary settings loader then parses: one set of rules for every process.
"""

import argparse
from collections.abc import Mapping

from entrypoints.backends import BACKENDS, NAMES

PREFIX = "WSFLEET_"  # entrypoints.settings.PREFIX (not imported: it loads every adapter)

# argparse destination -> the environment variable it overrides.
FLAG_VARIABLES = {
    "backend": PREFIX + "BACKEND",
    "data_dir": PREFIX + "DATA_DIR",
    "endpoint_url": PREFIX + "AWS_ENDPOINT_URL",
    "dynamodb_endpoint_url": PREFIX + "DYNAMODB_ENDPOINT_URL",
    "region": PREFIX + "REGION",
    "queue_url": PREFIX + "QUEUE_URL",
}


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """The backend switch. Defaults are SUPPRESSed so that an option given before the command
    (`wsfleet --backend aws status`) is not reset by the command's parser, and vice versa."""
    group = parser.add_argument_group("backend (flags override WSFLEET_* variables)")
    group.add_argument(
        "--backend",
        choices=NAMES,
        default=argparse.SUPPRESS,
        help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()) + " [WSFLEET_BACKEND]",
    )
    group.add_argument(
        "--data-dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="the embedded backend's directory (default ./.wsfleet) [WSFLEET_DATA_DIR]",
    )
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="aws: one endpoint for every AWS service, e.g. a local moto server "
        "[WSFLEET_AWS_ENDPOINT_URL]",
    )
    group.add_argument(
        "--dynamodb-endpoint-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="aws: DynamoDB's endpoint alone, ahead of --endpoint-url, e.g. DynamoDB Local "
        "[WSFLEET_DYNAMODB_ENDPOINT_URL]",
    )
    group.add_argument(
        "--region", default=argparse.SUPPRESS, help="aws: the AWS region [WSFLEET_REGION]"
    )
    group.add_argument(
        "--queue-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="aws: the SQS hint queue (start, stop, api, worker) [WSFLEET_QUEUE_URL]",
    )


def command_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    env = dict(environ)
    for dest, variable in FLAG_VARIABLES.items():
        value = getattr(args, dest, None)
        if value is not None:
            env[variable] = str(value)
    return env
