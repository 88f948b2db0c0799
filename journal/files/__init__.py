"""Entry files and their rules.

The Entry record, its schema and canonical JSON, the no-clobber store, the manifest, the writer
lock, safe paths, durable fsync and output files, and what opening a directory relies on.
"""

from journal.files._forking import watch_for_fork
from journal.files._fsync import fsync_directory
from journal.files._json import json_depth_exceeds, json_type_name, show_value
from journal.files._lock import WriteLock, current_boot_id, stamp_of
from journal.files._manifest import Manifest, create_manifest, holds_journal_manifest, load_manifest
from journal.files._opening import ensure_dir, may_fall_back, undone_on_failure
from journal.files._redaction import REDACT_MODES, Redactor, make_redactor
from journal.files._safefs import (
    DIR_MODE,
    FILE_MODE,
    Owner,
    check_dir,
    check_regular,
    describe,
    journal_owner,
    make_dir,
    open_regular,
    take_ownership,
)
from journal.files._schema import is_agent_name, require_object
from journal.files._storage import scratch_errors, storage_error, storage_errors
from journal.files._tombstone import ERASE_KEY_FILE, erased_hash, load_erase_key, tombstone_payload

__all__ = [
    "DIR_MODE",
    "ERASE_KEY_FILE",
    "FILE_MODE",
    "REDACT_MODES",
    "Manifest",
    "Owner",
    "Redactor",
    "WriteLock",
    "check_dir",
    "check_regular",
    "create_manifest",
    "current_boot_id",
    "describe",
    "ensure_dir",
    "erased_hash",
    "fsync_directory",
    "holds_journal_manifest",
    "is_agent_name",
    "journal_owner",
    "json_depth_exceeds",
    "json_type_name",
    "load_erase_key",
    "load_manifest",
    "make_dir",
    "make_redactor",
    "may_fall_back",
    "open_regular",
    "require_object",
    "scratch_errors",
    "show_value",
    "stamp_of",
    "storage_error",
    "storage_errors",
    "take_ownership",
    "tombstone_payload",
    "undone_on_failure",
    "watch_for_fork",
]
