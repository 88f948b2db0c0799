"""Checking a journal: every entry file, then the index against what a rebuild of those files would make."""

__all__: list[str] = []
