"""`make lambda-zip`'s choices, checked offline (installing the dependencies for the Lambda
platform needs the package index, so the tests stop short of pip)."""

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.infra.terraform import INFRA, load

_SCRIPT = INFRA / "scripts" / "build_lambda_zip.py"


@pytest.fixture(scope="module")
def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_lambda_zip", _SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_package_holds_the_handler_terraform_names_and_everything_it_imports(
    builder: ModuleType,
) -> None:
    tf = load()
    handler = tf.evaluate(tf.resource("aws_lambda_function", "router")["handler"])
    modules, _ = builder.closure(handler.rpartition(".")[0])
    assert {
        "entrypoints.lambda_router.handler",
        "entrypoints.lambda_router.proxy",
        "adapters.dynamodb.connection_store",
        "adapters.sqs.queue",
        "application.router",
        "domain.decide",
    } <= modules
    assert not any(m.startswith("tests") for m in modules)
    assert "entrypoints.worker_main" not in modules  # the worker process is not the router's


def test_package_holds_the_deaths_handler_terraform_names_and_needs_nothing_more(
    builder: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    tf = load()
    handler = tf.evaluate(tf.resource("aws_lambda_function", "deaths")["handler"])
    module = handler.rpartition(".")[0]
    assert module in builder.HANDLER_MODULES
    modules, external = builder.closure(module)
    _, router_external = builder.closure(builder.HANDLER_MODULE)
    assert {"application.deaths", "entrypoints.lambda_deaths.events"} <= modules
    assert external <= router_external  # no distribution beyond the router's
    assert builder.main(["--list"]) == 0  # the default build packages both handlers
    listed = capsys.readouterr().out.split()
    assert {"entrypoints.lambda_router.handler", "entrypoints.lambda_deaths.handler"} <= set(listed)


def test_dependencies_are_what_the_router_imports_at_run_time_pinned_to_tested_versions(
    builder: ModuleType,
) -> None:
    _, external = builder.closure(builder.HANDLER_MODULE)
    assert not any(name.startswith("types_") for name in external), "typing-only imports"
    pins = builder.requirements(external)
    names = {pin.split("==")[0].lower() for pin in pins}
    assert {"aioboto3", "aiobotocore", "botocore"} <= names
    # The containers open clients through aioboto3; test tools never ship.
    assert names.isdisjoint({"pytest", "moto", "hypothesis", "mypy", "ruff"})
    assert all("==" in pin for pin in pins)


def test_zip_is_reproducible_and_importable(builder: ModuleType, tmp_path: Path) -> None:
    modules, _ = builder.closure(builder.HANDLER_MODULE)
    files = builder.package_files(modules, None)
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    builder.write_zip(files, first)
    builder.write_zip(files, second)
    assert first.read_bytes() == second.read_bytes()
    # The handler imports from the zip's root, as Lambda lays it out (the dependencies come
    # from this environment here, since the test builds without them).
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import entrypoints.lambda_router.handler as h; "
        "assert h.__file__.startswith(sys.argv[1]), h.__file__; assert callable(h.handler)"
    )
    subprocess.run([sys.executable, "-c", probe, str(first)], check=True, timeout=60)
