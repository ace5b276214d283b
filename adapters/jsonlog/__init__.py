"""Adapters that write to the process log (JSON lines): metrics for one host."""
