"""checkov over infra/ and the Dockerfile: no failed check, and every skipped check carries its
justification in a `#checkov:skip=<id>:<why>` comment on the resource.

checkov lives in its own virtualenv (it pins an old boto3 that conflicts with aiobotocore):
`make test` builds .venv-checkov first (`make checkov` runs it alone). Offline: no platform
download, no update check.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.infra.terraform import INFRA, REPO

CHECKOV = Path(os.environ.get("WSFLEET_CHECKOV", REPO / ".venv-checkov" / "bin" / "checkov"))
MIN_JUSTIFICATION = 30  # characters: a reason, not "n/a"


def _in_ci() -> bool:
    # CI services set CI=true (GitHub Actions, GitLab, CircleCI, Buildkite); "false"/"0" is not CI.
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _require_checkov() -> None:
    """In CI a missing checkov is a failure: a skipped check there would read as a pass.
    Elsewhere (a laptop without `make checkov` yet) it is a loud skip: a warning in the
    summary as well as the skip reason."""
    if CHECKOV.exists():
        return
    message = f"{CHECKOV} is missing: run `make checkov` (make test builds it)"
    if _in_ci():
        pytest.fail(f"{message}; CI must run checkov, not skip it")
    warnings.warn(f"checkov NOT RUN: {message}", UserWarning, stacklevel=2)
    pytest.skip(f"checkov NOT RUN: {message}")


def _checkov(*target: str) -> dict[str, Any]:
    _require_checkov()
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE"}
    completed = subprocess.run(
        [str(CHECKOV), *target, "--skip-download", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr[-2000:]
    report: Any = json.loads(completed.stdout)
    return dict(report[0] if isinstance(report, list) else report)


@pytest.mark.parametrize(
    "target",
    [
        ("--directory", str(INFRA), "--framework", "terraform"),
        ("--file", str(REPO / "Dockerfile"), "--framework", "dockerfile"),
    ],
    ids=["terraform", "dockerfile"],
)
def test_checkov_passes_with_every_skip_justified(target: tuple[str, ...]) -> None:
    report = _checkov(*target)
    results = report["results"]
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}:{c['file_line_range']})"
        for c in results["failed_checks"]
    ]
    assert failed == []
    assert results["parsing_errors"] == []
    assert report["summary"]["passed"] > 0
    for skipped in results["skipped_checks"]:
        why = (skipped["check_result"].get("suppress_comment") or "").strip()
        assert len(why) >= MIN_JUSTIFICATION, f"{skipped['check_id']} on {skipped['resource']}"


@pytest.mark.parametrize("ci", ["true", "1"])
def test_a_missing_checkov_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHECKOV", tmp_path / "no")
    monkeypatch.setenv("CI", ci)

    with pytest.raises(pytest.fail.Exception, match="CI must run checkov"):
        _require_checkov()


@pytest.mark.parametrize("ci", [None, "false", "0"])
def test_a_missing_checkov_outside_ci_is_a_loud_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str | None
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHECKOV", tmp_path / "no")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)

    with (
        pytest.warns(UserWarning, match="checkov NOT RUN"),
        pytest.raises(pytest.skip.Exception, match="checkov NOT RUN"),
    ):
        _require_checkov()
