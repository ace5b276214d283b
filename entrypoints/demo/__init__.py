"""`wsfleet demo`: see entrypoints/demo/cli.py."""
