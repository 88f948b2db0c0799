"""The derived SQLite index and the views computed over its rows.

Its tables, lexical search, what a rebuild keeps (vectors, the digest each entry was indexed with),
the scope of a read, supersede proposals, digests (a window's summary), and the snapshot
through which a check, an export or a backup reads one instant of it: no module outside
this folder runs SQL. It never reads an entry file: the entries it indexes are handed to it.
"""

from journal.indexing._fts import QueryWords
from journal.indexing._proposals import (
    AUTO_ACCEPT_CHANGE_THRESHOLD,
    AUTO_ACCEPT_COSINE,
    AUTO_ACCEPT_THRESHOLD,
    COMMON_SHARE,
    COMMON_WINDOW,
    DECISIONS,
    MEANING_THRESHOLD,
    NOVELTY_THRESHOLD,
    PROPOSAL_THRESHOLD,
    Proposal,
    auto_acceptable,
    decision_of,
)
from journal.indexing._scope import Scope, bound, cutoff, positive, shown_key
from journal.indexing.snapshot import IndexSnapshot, copy_index

__all__ = [
    "AUTO_ACCEPT_CHANGE_THRESHOLD",
    "AUTO_ACCEPT_COSINE",
    "AUTO_ACCEPT_THRESHOLD",
    "COMMON_SHARE",
    "COMMON_WINDOW",
    "DECISIONS",
    "MEANING_THRESHOLD",
    "NOVELTY_THRESHOLD",
    "PROPOSAL_THRESHOLD",
    "IndexSnapshot",
    "Proposal",
    "QueryWords",
    "Scope",
    "auto_acceptable",
    "bound",
    "copy_index",
    "cutoff",
    "decision_of",
    "positive",
    "shown_key",
]
