"""A journal kept in step with its files.

Opening it, keeping its index in step with the entry files, the durable append (of one entry, or of a group), and the reads
that check each index row against its file.
"""

from journal.sync._append import AppendResult, append
from journal.sync._decide import decided, decision_key, decision_payload
from journal.sync._erase import EraseResult, erase, ids_of_agent, operator_name
from journal.sync._group import FILES_AT_ONCE, GroupOutcome, append_group
from journal.sync._keeper import IndexKeeper, recovering, writing
from journal.sync._reading import ANOTHER_AGENTS_ENTRY, MAX_LIMIT, Reader, SkippedFile, first_of_each, load_entry, shown_path, shown_reason

__all__ = [
    "ANOTHER_AGENTS_ENTRY",
    "FILES_AT_ONCE",
    "MAX_LIMIT",
    "AppendResult",
    "EraseResult",
    "GroupOutcome",
    "IndexKeeper",
    "Reader",
    "SkippedFile",
    "append",
    "append_group",
    "decided",
    "decision_key",
    "decision_payload",
    "erase",
    "first_of_each",
    "ids_of_agent",
    "load_entry",
    "operator_name",
    "recovering",
    "shown_path",
    "shown_reason",
    "writing",
]
