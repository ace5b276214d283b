"""The README's quickstart, run as a newcomer would type it: the lines between its markers,
after the install (this run's virtualenv stands in for it), in a fresh directory. A README
that tells a newcomer something that does not work fails here."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
BLOCK = re.compile(r"<!-- quickstart:begin -->\n```sh\n(.*?)```\n<!-- quickstart:end -->", re.S)


def _quickstart() -> list[str]:
    match = BLOCK.search((ROOT / "README.md").read_text())
    assert match, "README.md has no quickstart block between its markers"
    return match.group(1).splitlines()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readme_quickstart_stores_messages_and_reads_them_back(tmp_path: Path) -> None:
    lines = _quickstart()
    install, activate, *steps = lines
    assert "pip install" in install, install
    assert "./dev" in install, install  # the sample upstream is the dev tooling's simulator
    assert "activate" in activate, activate
    port = str(_free_port())  # the README's 9100 may be taken on a shared machine
    script = "\n".join(["set -eu", *steps]).replace("9100", port)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WSFLEET_")},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }

    done = subprocess.run(
        ["bash", "-c", script + "\nwait"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    stored = [line for line in done.stdout.splitlines() if line.startswith(("1\t", "1 "))]
    assert stored, f"no message seq 1 printed by `wsfleet messages`:\n{done.stdout}"
    assert "meeting-42" in done.stdout, done.stdout  # `wsfleet status` lists it
    assert (tmp_path / ".wsfleet").is_dir()
