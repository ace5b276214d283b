"""Fixtures shared by every tier. AWS tests use the dev stack's local AWS (DynamoDB Local and a
moto server); nothing leaves 127.0.0.1."""

import os

import pytest

from tests.support.aws import aws, aws_session, summary_lines

# Every test runs with asyncio debug mode: slow callbacks and unawaited coroutines show up.
os.environ.setdefault("PYTHONASYNCIODEBUG", "1")

__all__ = ["aws", "aws_session"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary_lines()
    if not lines:
        return  # no test used AWS
    warn = any(line.startswith("WARNING") for line in lines)
    terminalreporter.section("DynamoDB engine", yellow=warn, bold=warn)
    for line in lines:
        terminalreporter.write_line(line, yellow=warn, bold=warn)
