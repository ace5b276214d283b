"""Fixtures shared by every tier. AWS tests use the dev stack's local AWS (DynamoDB Local and a
moto server); nothing leaves 127.0.0.1."""

import os
from typing import Any

import pytest

from tests.support.aws import aws, aws_session, summary_lines

# Every test runs with asyncio debug mode: slow callbacks and unawaited coroutines show up.
os.environ.setdefault("PYTHONASYNCIODEBUG", "1")

__all__ = ["aws", "aws_session"]

# Under pytest-xdist (`make test` runs most tiers on two workers) each worker starts its own
# local AWS; the lines that say which engine served it come back to the controller here.
_WORKER_LINES: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["dynamodb_engine"] = summary_lines()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    output: dict[str, Any] = getattr(node, "workeroutput", None) or {}
    _WORKER_LINES.extend(output.get("dynamodb_engine", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = list(dict.fromkeys([*summary_lines(), *_WORKER_LINES]))
    if not lines:
        return  # no test used AWS
    warn = any(line.startswith("WARNING") for line in lines)
    terminalreporter.section("DynamoDB engine", yellow=warn, bold=warn)
    for line in lines:
        terminalreporter.write_line(line, yellow=warn, bold=warn)
