"""`wsfleet api` bound where the network reaches it: a LAN client can send `Host: localhost`,
so the Host check does not protect it there and a token is required to start."""

from pathlib import Path

import pytest

from entrypoints.cli.api_perimeter import require_token_off_loopback
from entrypoints.web import is_loopback_bind
from tests.e2e.cli_process import run_cli


def test_binding_every_address_without_a_token_is_refused_at_start(tmp_path: Path) -> None:
    done = run_cli(
        ["api", "--host", "0.0.0.0", "--port", "0"],
        tmp_path,
        {"WSFLEET_DATA_DIR": str(tmp_path)},
        timeout_s=30,
    )

    assert done.returncode == 2
    assert "--host / WSFLEET_API_HOST=0.0.0.0" in done.stderr
    assert "WSFLEET_API_TOKEN" in done.stderr
    assert "listening" not in done.stdout


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("myhost.example", False),
    ],
)
def test_only_loopback_binds_count_as_local(host: str, loopback: bool) -> None:
    assert is_loopback_bind(host) is loopback


def test_a_token_lifts_the_refusal() -> None:
    require_token_off_loopback("0.0.0.0", "t0ken-of-sixteen-chars")
    require_token_off_loopback("127.0.0.1", None)
