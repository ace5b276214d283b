"""Metrics on Amazon CloudWatch."""
