"""The derived SQLite index and the views computed over its rows.

Its tables, lexical search, kept vectors, the scope of a read, hits and digests. It never reads
an entry file: the entries it indexes are handed to it.
"""

__all__: list[str] = []
