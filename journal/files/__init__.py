"""Entry files and their rules.

The Entry record, its schema and canonical JSON, the no-clobber store, the manifest, the writer
lock, safe paths, durable fsync and output files, and what opening a directory relies on.
"""

__all__: list[str] = []
