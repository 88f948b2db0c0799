"""A journal kept in step with its files.

Opening it, keeping its index in step with the entry files, the durable append, and the reads
that check each index row against its file.
"""

__all__: list[str] = []
