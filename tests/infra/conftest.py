"""The infra tier's switch: `terraform test` (a plan of every resource on a mocked provider,
about a minute and a half of a loaded 2-core machine) runs with `--terraform-plan`, which
`make terraform` passes; `make test` checks the same facts on the parsed files
(tests/infra/test_terraform_matches_code.py) and runs `terraform fmt` and `validate`."""

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--terraform-plan",
        action="store_true",
        help="also run `terraform test` on a mocked provider (make terraform)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "terraform_plan: `terraform test` on a plan, run with --terraform-plan"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--terraform-plan", default=False):
        return
    skip = pytest.mark.skip(
        reason="`terraform test` runs in `make terraform` (--terraform-plan); its facts are "
        "checked in make test by tests/infra/test_terraform_matches_code.py"
    )
    for item in items:
        if "terraform_plan" in item.keywords:
            item.add_marker(skip)
