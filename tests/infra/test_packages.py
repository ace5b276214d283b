"""The repository's two distributions: the service (pyproject.toml, `pip wheel .`) and its dev
tooling, wsfleet-dev (dev/pyproject.toml). Both wheels are built from a copy of the sources and
compared; then the service's wheel, installed alone, imports every module it ships and answers
the dev commands with one line.

The copy has no build/ directory (setuptools puts whatever an earlier build left in build/lib
into the next wheel: `make clean` after building a wheel at a commit before the split), but it
has the wsfleet.egg-info/SOURCES.txt an editable install leaves in every checkout, listing
every module: setuptools adds those back as package data unless the service turns it off."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.infra.terraform import INFRA, REPO

SERVICE_PACKAGES = ("domain", "application", "adapters", "entrypoints")
# The done-when of the split: none of these is a part of any path in the service's wheel.
DEV_NAMES = {"devstack", "demo", "simulator", "faults"}


def _project(path: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads(path.read_text())["project"]
    return project


def _dev_packages() -> list[str]:
    packages: list[str] = tomllib.loads((REPO / "dev" / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]["packages"]
    return packages


def _modules_in(names: list[str]) -> set[str]:
    return {name for name in names if name.endswith(".py")}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Distribution name -> its wheel, built from a copy of the sources."""
    source = tmp_path_factory.mktemp("source")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in SERVICE_PACKAGES:
        shutil.copytree(REPO / package, source / package, ignore=skip)
    for name in ("pyproject.toml", "README.md", "dev/pyproject.toml"):
        (source / name).parent.mkdir(exist_ok=True)
        shutil.copy(REPO / name, source / name)
    (source / "wsfleet.egg-info").mkdir()
    listed = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.py"))
    (source / "wsfleet.egg-info" / "SOURCES.txt").write_text("\n".join(listed) + "\n")
    out = tmp_path_factory.mktemp("wheels")
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, "-w", str(out), ".", "./dev"], cwd=source, check=True)
    return {wheel.name.split("-")[0].replace("_", "-"): wheel for wheel in out.glob("*.whl")}


@pytest.fixture(scope="module")
def wheels(built: dict[str, Path]) -> dict[str, list[str]]:
    """Distribution name -> the file names in its wheel."""
    result = {}
    for name, wheel in built.items():
        with zipfile.ZipFile(wheel) as archive:
            result[name] = archive.namelist()
    return result


def test_the_service_wheel_holds_no_devstack_demo_simulator_or_faults_module(
    wheels: dict[str, list[str]],
) -> None:
    leaked = [name for name in wheels["wsfleet"] if DEV_NAMES & set(name.split("/"))]
    assert not leaked, leaked
    assert "entrypoints/worker_main.py" in wheels["wsfleet"]
    assert "entrypoints/lambda_router/handler.py" in wheels["wsfleet"]
    assert "entrypoints/cli/fleet.py" in wheels["wsfleet"]


def test_the_two_wheels_share_no_module_and_together_hold_every_one(
    wheels: dict[str, list[str]],
) -> None:
    service = _modules_in(wheels["wsfleet"])
    dev = _modules_in(wheels["wsfleet-dev"])
    assert not service & dev
    in_repo = {
        path.relative_to(REPO).as_posix()
        for package in SERVICE_PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert service | dev == in_repo, in_repo ^ (service | dev)
    # Every subpackage of the dev tooling is listed (setuptools does not add them by itself).
    assert {name.rpartition("/")[0].replace("/", ".") for name in dev} == set(_dev_packages())


def test_the_dev_tooling_requires_exactly_this_version_of_the_service() -> None:
    service = _project(REPO / "pyproject.toml")
    dev = _project(REPO / "dev" / "pyproject.toml")
    assert dev["version"] == service["version"]
    assert dev["dependencies"] == [f"{service['name']}=={service['version']}"]


def test_the_lambda_package_holds_none_of_the_dev_tooling() -> None:
    spec = importlib.util.spec_from_file_location(
        "build_lambda_zip", INFRA / "scripts" / "build_lambda_zip.py"
    )
    assert spec is not None
    assert spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    for handler in builder.HANDLER_MODULES:
        modules, _ = builder.closure(handler)
        dev = [m for m in modules if any(m.startswith(p) for p in _dev_packages())]
        assert not dev, (handler, dev)


@pytest.fixture(scope="module")
def service_alone(
    built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment of a `python -S` that sees the service's wheel and the third-party
    packages of this virtualenv, but not the editable installs (their .pth files are not read
    under -S): what a service-only install can import."""
    target = tmp_path_factory.mktemp("service-only")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    subprocess.run([*command, "--target", str(target), str(built["wsfleet"])], check=True)
    paths = dict.fromkeys(
        [str(target), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    )
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("WSFLEET_", "PYTHON"))},
        "PYTHONPATH": os.pathsep.join(paths),
        "WSFLEET_DATA_DIR": str(target.parent / "data"),
    }


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_service_alone_imports_every_module_it_ships(
    wheels: dict[str, list[str]], service_alone: dict[str, str], tmp_path: Path
) -> None:
    modules = sorted(
        name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for name in _modules_in(wheels["wsfleet"])
        if not name.endswith("__main__.py")  # these run their command when imported
    )
    script = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n"
    script += "import entrypoints; print(entrypoints.__file__)"
    done = _run(service_alone, tmp_path, "-c", script, *modules)
    assert done.returncode == 0, done.stderr
    assert not done.stdout.startswith(str(REPO)), "imported from the repository, not the wheel"


@pytest.mark.parametrize(
    "command",
    [["demo", "--workers", "3"], ["simulate-upstream", "--port", "0"]],
    ids=lambda command: command[0],
)
def test_a_dev_command_without_the_dev_tooling_says_what_to_install_in_one_line(
    command: list[str], service_alone: dict[str, str], tmp_path: Path
) -> None:
    done = _run(service_alone, tmp_path, "-m", "entrypoints.cli", *command)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"wsfleet {command[0]}: "), done.stderr
    assert "pip install ./dev" in done.stderr


def test_chaos_control_without_the_dev_tooling_is_refused_in_one_line(
    service_alone: dict[str, str], tmp_path: Path
) -> None:
    env = {**service_alone, "WSFLEET_CHAOS_CONTROL": str(tmp_path / "chaos.json")}
    done = _run(env, tmp_path, "-m", "entrypoints.cli", "worker", "--health-port", "0")
    assert done.returncode == 2, done.stderr
    refusal = [line for line in done.stderr.splitlines() if "WSFLEET_CHAOS_CONTROL" in line]
    assert refusal == [refusal[0]], done.stderr
    assert "pip install ./dev" in refusal[0]
    assert "Traceback" not in done.stderr


def test_the_image_build_context_leaves_the_dev_tooling_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    for package in _dev_packages():
        assert package.replace(".", "/") + "/" in ignored, package
