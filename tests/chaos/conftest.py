"""The chaos suite's switches: the long soak is marked `soak` and runs only with `--soak`
(`make chaos`); its length comes from CHAOS_MINUTES. A summary of every chaos run (faults
injected, invariant checks, worst recovery per fault) is printed at the end of the session."""

import pytest

from tests.chaos.scenarios import Outcome

_OUTCOMES: list[Outcome] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="run the chaos soak (make chaos)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: the long chaos soak, run only with --soak")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--soak", default=False):
        return
    skip = pytest.mark.skip(reason="the chaos soak runs with --soak (make chaos)")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def chaos_outcomes() -> list[Outcome]:
    return _OUTCOMES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _OUTCOMES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("chaos summary")
    faults: dict[str, int] = {}
    worst: dict[str, float] = {}
    count: dict[str, int] = {}
    checks = 0
    for outcome in _OUTCOMES:
        checks += outcome.stats.checks + outcome.verdict.checks
        for kind, n in outcome.stats.faults.items():
            faults[kind] = faults.get(kind, 0) + n
        for kind, seconds in outcome.stats.recoveries.items():
            worst[kind] = max([worst.get(kind, 0.0), *seconds])
            count[kind] = count.get(kind, 0) + len(seconds)
    failed = sum(not o.ok for o in _OUTCOMES)
    backends = sorted({o.backend for o in _OUTCOMES})
    write(f"runs: {len(_OUTCOMES)} ({', '.join(backends)}), failed: {failed}")
    write(f"faults injected: {sum(faults.values())}, invariant checks: {checks}")
    for kind in sorted(faults):
        write(f"  {faults[kind]:5d} x {kind}")
    write("recovery (worst observed, seconds; n = times measured):")
    for kind in sorted(worst):
        write(f"  {worst[kind]:6.2f}  {kind} (n={count[kind]})")
