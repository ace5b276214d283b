"""The worker's Dockerfile, checked for the essentials without building it (no Docker engine
here): a non-root user, no secrets, an entrypoint and a health check that exist in the package
and agree with the ECS task definition."""

import importlib.util
import json
import re
import tomllib

import pytest

from tests.infra.terraform import REPO, Terraform, load

_SECRET_NAME = re.compile(
    r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_KEY)", re.I
)
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, arguments = line.partition(" ")
        result.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return result


def _final_stage() -> list[tuple[str, str]]:
    parsed = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(parsed) if keyword == "FROM")
    return parsed[last_from:]


def _only(keyword: str) -> str:
    (arguments,) = [a for k, a in _final_stage() if k == keyword]
    return arguments


@pytest.fixture(scope="module")
def tf() -> Terraform:
    return load()


def test_image_runs_as_the_non_root_user_of_the_task_definition(tf: Terraform) -> None:
    user = _only("USER").split(":")[0]
    assert user not in ("", "root", "0")
    assert user == tf.locals["worker_container"]["user"]
    final = _final_stage()
    assert final.index(("USER", _only("USER"))) > max(
        i for i, (k, _) in enumerate(final) if k == "RUN"
    ), "USER must come after the last RUN, so nothing later runs as root"


def test_image_bakes_in_no_secrets() -> None:
    for keyword, arguments in instructions():
        if keyword in ("ENV", "ARG"):
            for name in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", arguments) or [arguments]:
                assert not _SECRET_NAME.search(name), f"{keyword} {arguments}"
                assert not name.upper().startswith("AWS_"), "credentials come from the task role"
    assert not _AWS_KEY_ID.search((REPO / "Dockerfile").read_text())


def test_command_runs_the_worker_module_of_the_package() -> None:
    command = json.loads(_only("CMD"))
    assert command == ["python", "-m", "entrypoints.worker"]
    assert importlib.util.find_spec("entrypoints.worker.__main__") is not None


def test_health_check_is_the_task_definitions(tf: Terraform) -> None:
    healthcheck = _only("HEALTHCHECK")
    options = dict(re.findall(r"--([a-z-]+)=(\S+)", healthcheck))
    command = json.loads(healthcheck[healthcheck.index("CMD") + len("CMD") :].strip())
    ecs = tf.locals["worker_container"]["healthCheck"]
    assert ["CMD", *command] == tf.evaluate(ecs["command"])
    assert importlib.util.find_spec(command[2]) is not None
    assert options == {
        "interval": f"{ecs['interval']}s",
        "timeout": f"{ecs['timeout']}s",
        "start-period": f"{ecs['startPeriod']}s",
        "retries": str(ecs["retries"]),
    }


def test_dependencies_come_from_the_projects_metadata() -> None:
    runs = " ".join(a for k, a in instructions() if k == "RUN")
    assert "tomllib" in runs
    assert "['project']['dependencies']" in runs
    copied = {a.split()[0] for k, a in instructions() if k == "COPY" and "--from" not in a}
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package in packages["packages"]["find"]["include"]:
        assert package.rstrip("*") in copied, f"the image misses the {package} package"
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignored, ".dockerignore should admit only what the image needs"


def test_base_image_is_the_python_the_project_and_the_lambda_run() -> None:
    bases = [a.split()[0] for k, a in instructions() if k == "FROM"]
    assert bases
    assert all(b.startswith("python:3.11-slim") for b in bases)
