"""The derived SQLite index and the views computed over its rows.

Its tables, lexical search, kept vectors, the scope of a read and digests. It never reads
an entry file: the entries it indexes are handed to it.
"""

from journal.indexing._kept_vectors import ENCODER_PREFIX, ENCODER_RANGE
from journal.indexing._scope import Scope, bound, cutoff, positive, shown_key
from journal.indexing._tables import FTS_COLUMNS

__all__ = [
    "ENCODER_PREFIX",
    "ENCODER_RANGE",
    "FTS_COLUMNS",
    "Scope",
    "bound",
    "cutoff",
    "positive",
    "shown_key",
]
