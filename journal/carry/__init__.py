"""Carrying a journal: export, import and online backup.

An import reads our export streams and the journal directories of ghostjournal 0.1.1.
"""

__all__: list[str] = []
