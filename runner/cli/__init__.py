"""The ``ghostrunner`` command: its frame and options, each command group, and what a terminal shows."""

__all__: list[str] = []
