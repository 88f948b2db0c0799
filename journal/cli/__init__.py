"""The ``ghostjournal`` command; the frame it shares with ``ghostrunner`` is :mod:`journal.frame`."""

__all__: list[str] = []
