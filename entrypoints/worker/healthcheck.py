"""The container health check command: `python -m entrypoints.worker.healthcheck` exits 0 when
the worker's `/healthz` answers 200, 1 otherwise. Slim images have no curl; this needs only
the interpreter the worker already runs on."""

import os
import sys
import urllib.error
import urllib.request

from entrypoints.settings import SettingsError, load_settings


def main() -> int:
    try:
        settings = load_settings(os.environ, aws=False)
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 1
    if settings.health_port == 0:
        print("WSFLEET_HEALTH_PORT=0: the health endpoint is disabled", file=sys.stderr)
        return 1
    host = "127.0.0.1" if settings.health_host in ("0.0.0.0", "") else settings.health_host
    url = f"http://{host}:{settings.health_port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
