"""Fixtures shared by every tier. AWS tests use the dev stack's local AWS (DynamoDB Local and a
moto server), PostgreSQL tests its throwaway PostgreSQL; nothing leaves 127.0.0.1."""

import os
from typing import Any

import pytest

from tests.chaos import summary as chaos_summary
from tests.support.aws import aws, aws_session, summary_lines
from tests.support.postgres import postgres_server, postgres_url

# Every test runs with asyncio debug mode: slow callbacks and unawaited coroutines show up.
os.environ.setdefault("PYTHONASYNCIODEBUG", "1")

__all__ = ["aws", "aws_session", "postgres_server", "postgres_url"]

# Under pytest-xdist (`make test` runs every tier on two workers) each worker starts its own
# local AWS; the lines that say which engine served it, and the totals of the chaos runs it
# made, come back to the controller here.
_WORKER_LINES: list[str] = []
_WORKER_CHAOS: list[dict[str, Any]] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["dynamodb_engine"] = summary_lines()
        workeroutput["chaos_totals"] = chaos_summary.totals(chaos_summary.OUTCOMES)


# `make test` runs the `serial` tests (judged against timing bounds) on two xdist workers with
# `--dist loadgroup`: the chaos runs one after the other on one worker, the demo and hostile
# tiers on the other. Never two chaos fleets at once; one test at a time left a core idle
# (49 % idle over the serial run of a clean clone). tryfirst: xdist reads the groups in its
# own hook of the same name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "serial" in item.keywords:
            group = "chaos" if item.nodeid.startswith("tests/chaos/") else "beside-chaos"
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    output: dict[str, Any] = getattr(node, "workeroutput", None) or {}
    _WORKER_LINES.extend(output.get("dynamodb_engine", []))
    if "chaos_totals" in output:
        _WORKER_CHAOS.append(output["chaos_totals"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    chaos_summary.write(
        terminalreporter, [chaos_summary.totals(chaos_summary.OUTCOMES), *_WORKER_CHAOS]
    )
    lines = list(dict.fromkeys([*summary_lines(), *_WORKER_LINES]))
    if not lines:
        return  # no test used AWS
    warn = any(line.startswith("WARNING") for line in lines)
    terminalreporter.section("DynamoDB engine", yellow=warn, bold=warn)
    for line in lines:
        terminalreporter.write_line(line, yellow=warn, bold=warn)
