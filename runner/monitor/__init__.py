"""Monitoring: structured logs, what they say about runs, status, history and the runs report."""

__all__: list[str] = []
