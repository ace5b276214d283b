"""infra/ checked by Terraform itself, offline: `terraform fmt -check`, `terraform validate`,
and `terraform test` (infra/tests/*.tftest.hcl) against a mocked AWS provider — index keys,
IAM actions per role, the autoscaling target, alarm and dashboard wiring, all compared with
infra/tests/code_facts.json, which the code generates (checked current below). `terraform
test` runs in `make terraform` only (tests/infra/conftest.py says why).

The tools: `terraform` >= 1.7 (mock_provider) on PATH or WSFLEET_TERRAFORM, and the
hashicorp/aws provider in a local plugin directory (WSFLEET_TF_PLUGIN_DIR, else the usual
places; machines of this project's kind have Terraform 1.11 and the provider 5.100 in
/opt/tf-plugins). Nothing is downloaded: `terraform init -plugin-dir` only. Working files go
to build/terraform (TF_DATA_DIR); the lock file init writes in infra/ is git-ignored.

Where the tools are missing the tier is skipped with the reason in pytest's summary — except
under CI=true, where it fails (this machine kind is meant to have them), unless
WSFLEET_SKIP_TERRAFORM=1 says on purpose that this CI machine has none.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.infra.code_facts import FACTS, render
from tests.infra.terraform import INFRA, REPO

PLUGIN_DIRS = (
    Path("/opt/tf-plugins"),
    Path.home() / ".terraform.d" / "plugins",
    Path("/usr/share/terraform/plugins"),
    Path("/usr/local/share/terraform/plugins"),
)
MIN_VERSION = (1, 7)  # mock_provider in `terraform test`


def _plugin_dir() -> Path | None:
    configured = os.environ.get("WSFLEET_TF_PLUGIN_DIR")
    for candidate in [Path(configured)] if configured else PLUGIN_DIRS:
        pattern = "registry.terraform.io/hashicorp/aws/*/*/terraform-provider-aws*"
        if candidate.is_dir() and any(candidate.glob(pattern)):
            return candidate
    return None


def _missing(reason: str) -> None:
    message = f"TERRAFORM TIER NOT RUN: {reason}"
    if os.environ.get("WSFLEET_SKIP_TERRAFORM") == "1":
        pytest.skip(message + " (WSFLEET_SKIP_TERRAFORM=1)")
    if os.environ.get("CI"):
        pytest.fail(message + "; CI machines of this kind must have it (or set "
                    "WSFLEET_SKIP_TERRAFORM=1 on purpose)")  # fmt: skip
    pytest.skip(message)


class Terraform:
    def __init__(self, binary: str, plugin_dir: Path) -> None:
        self.binary = binary
        self.plugin_dir = plugin_dir
        self.env = {
            **os.environ,
            "TF_DATA_DIR": str(REPO / "build" / "terraform"),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",  # no version check over the network
            "TF_CLI_CONFIG_FILE": os.devnull,  # no user config: no mirrors, no credentials
        }

    def run(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, f"-chdir={INFRA}", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )


@pytest.fixture(scope="module")
def terraform() -> Terraform:
    binary = os.environ.get("WSFLEET_TERRAFORM") or shutil.which("terraform")
    if binary is None:
        _missing("no `terraform` on PATH (or WSFLEET_TERRAFORM)")
    assert binary is not None
    version = json.loads(
        subprocess.run(
            [binary, "version", "-json"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    )["terraform_version"]
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < MIN_VERSION:
        _missing(f"terraform {version} is older than 1.7 (no mock_provider)")
    plugin_dir = _plugin_dir()
    if plugin_dir is None:
        _missing("no hashicorp/aws provider in a local plugin directory (WSFLEET_TF_PLUGIN_DIR)")
    assert plugin_dir is not None
    tf = Terraform(binary, plugin_dir)
    init = tf.run("init", "-backend=false", f"-plugin-dir={plugin_dir}", "-no-color")
    assert init.returncode == 0, init.stdout[-3000:] + init.stderr[-3000:]
    return tf


def test_code_facts_for_terraform_test_are_current() -> None:
    assert FACTS.read_text() == render(), (
        "infra/tests/code_facts.json is stale: "
        "`.venv/bin/python -m tests.infra.code_facts > infra/tests/code_facts.json`"
    )


def test_terraform_fmt(terraform: Terraform) -> None:
    result = terraform.run("fmt", "-check", "-recursive", "-diff", "-no-color")
    assert result.returncode == 0, f"`terraform fmt -recursive infra` needed:\n{result.stdout}"


def test_terraform_validate(terraform: Terraform) -> None:
    result = terraform.run("validate", "-no-color")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.terraform_plan
def test_terraform_test_with_a_mocked_provider(terraform: Terraform) -> None:
    result = terraform.run("test", "-no-color", timeout_s=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert re.search(r"Success! [1-9]\d* passed, 0 failed", result.stdout), result.stdout
