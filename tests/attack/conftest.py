"""Fixtures the attack tests share with the runner tests: fresh logging per test, and reaped serve processes."""

from tests.runner.conftest import _clean_logging, processes

__all__ = ["_clean_logging", "processes"]  # pytest finds fixtures by the names a conftest holds
