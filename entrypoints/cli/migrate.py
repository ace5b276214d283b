"""`wsfleet migrate`: bring the backend's schema to this wsfleet's version, once per deploy and
before the new workers start (a worker refuses a schema it does not know, by name). Safe to run
again, and from two deploys at once (migrations are serialised in the database).

A backend without a versioned schema (embedded, aws) has nothing to migrate: that is said and
the command succeeds, so one deploy script serves every backend.
"""

import argparse
from collections.abc import Mapping

from entrypoints.backends import backend_of, load
from entrypoints.settings import load_settings

EXIT_OK = 0


async def migrate(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    settings = load_settings(env, aws=False)
    backend = backend_of(settings.backend)
    if backend.migrate is None:
        print(f"nothing to migrate: the {backend.name} backend has no versioned schema")
        return EXIT_OK
    found, now = await load(backend.migrate)(settings)
    print(f"schema at version {now} (was {found})")
    return EXIT_OK
