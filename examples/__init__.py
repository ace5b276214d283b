"""Small, working examples of wsfleet's extension points (tests/integration/test_extensions.py
and tests/e2e run them)."""
