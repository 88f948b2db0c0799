"""The ``ghostjournal`` command.

Also the command-line frame ``ghostrunner`` shares: options, typed times, terminal rendering.
"""

__all__: list[str] = []
