"""Fixtures shared by every tier. AWS tests use a local moto server; nothing leaves 127.0.0.1."""

import os

from tests.support.moto import moto, moto_server

# Every test runs with asyncio debug mode: slow callbacks and unawaited coroutines show up.
os.environ.setdefault("PYTHONASYNCIODEBUG", "1")

__all__ = ["moto", "moto_server"]
