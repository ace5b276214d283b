"""The dependency locks (requirements/*.lock, made from pyproject.toml by `make lock`): every
entry pinned exactly and hashed, every requirement of pyproject.toml present at a version it
accepts (a dependency added without `make lock` fails here, and `pip check` at install), the
image's versions the tests' versions, and `make install` reading them with --require-hashes."""

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.infra.terraform import REPO

LOCKS = ("build.lock", "test.lock", "worker.lock")
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


def entries(lock: str) -> list[tuple[Requirement, list[str]]]:
    """(requirement, hashes) per entry of requirements/<lock>."""
    text = (REPO / "requirements" / lock).read_text().replace("\\\n", " ")
    result = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement, *hashes = (part.strip() for part in line.split("--hash="))
            result.append((Requirement(requirement), hashes))
    return result


def pins(lock: str) -> set[tuple[str, str, frozenset[str]]]:
    """(name, version, hashes) per entry; markers left out (a package a test tool also needs
    may be unconditional in the test lock and conditional in the image's)."""
    return {
        (canonicalize_name(r.name), str(r.specifier), frozenset(hashes))
        for r, hashes in entries(lock)
    }


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_package_is_pinned_exactly_and_hashed(lock: str) -> None:
    locked = entries(lock)
    assert locked, f"requirements/{lock} is empty"
    for requirement, hashes in locked:
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", requirement
        assert "*" not in specifier.version, requirement
        assert hashes, f"{requirement} has no hash"
        assert all(_HASH.match(h) for h in hashes), requirement


def _requirements(lock: str) -> list[str]:
    project = _pyproject()
    runtime: list[str] = project["project"]["dependencies"]  # type: ignore[index]
    return {
        "worker.lock": runtime,
        "test.lock": [*runtime, *project["project"]["optional-dependencies"]["test"]],  # type: ignore[index]
        "build.lock": [*project["build-system"]["requires"], "pip"],  # type: ignore[index]
    }[lock]


@pytest.mark.parametrize("lock", LOCKS)
def test_the_lock_holds_every_requirement_of_pyproject_at_a_version_it_accepts(lock: str) -> None:
    locked = entries(lock)
    for text in _requirements(lock):
        wanted = Requirement(text)
        versions = [
            str(r.specifier).removeprefix("==")
            for r, _ in locked
            if canonicalize_name(r.name) == canonicalize_name(wanted.name)
        ]
        assert versions, f"{wanted.name} is not in requirements/{lock}: run `make lock`"
        for version in versions:
            assert wanted.specifier.contains(version, prereleases=True), (
                f"requirements/{lock} pins {wanted.name}=={version}, pyproject.toml wants "
                f"{wanted.specifier}: run `make lock`"
            )


def test_the_image_runs_the_versions_and_files_the_tests_ran() -> None:
    assert pins("worker.lock") <= pins("test.lock"), pins("worker.lock") - pins("test.lock")


def _recipe(header: str) -> list[str]:
    """The recipe lines of the Makefile rule whose first line is `header`."""
    lines = (REPO / "Makefile").read_text().splitlines()
    recipe = []
    for line in lines[lines.index(header) + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_install_installs_the_locks_with_their_hashes_and_fetches_nothing_else() -> None:
    recipe = _recipe("$(STAMP): pyproject.toml dev/pyproject.toml $(LOCKS)")
    installs = [line for line in recipe if "pip install" in line]
    assert installs == [
        "$(BIN)/python -m pip install --quiet --require-hashes -r requirements/build.lock",
        "$(BIN)/python -m pip install --quiet --require-hashes -r requirements/test.lock",
        "$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . -e ./dev",
    ]
    assert "$(BIN)/python -m pip check" in recipe


def test_make_lock_writes_every_lock_with_hashes() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "--generate-hashes" in makefile[makefile.index("COMPILE =") :].split("\n\n")[0]
    recipe = " ".join(_recipe("lock:"))
    for lock in LOCKS:
        assert f"-o requirements/{lock}" in recipe
