"""The `wsfleet` command (pyproject's console script `wsfleet = "entrypoints.cli:main"`)."""

from entrypoints.cli.main import main

__all__ = ["main"]
