"""Routine definitions for the runner: the Routine record, the built-ins, and the digest hook.

>>> from routines import BUILTIN_ROUTINES
>>> BUILTIN_ROUTINES["evening"].schedule
'0 21 * * *'
"""

from routines.builtin import BUILTIN_ROUTINES, DIGEST, EVENING, PULSE_4H
from routines.digest import DIGEST_KINDS, digest_entry_fields, digest_window
from routines.model import ROUTINE_FIELDS, SLOT_GRANULARITIES, Routine

__all__ = [
    "BUILTIN_ROUTINES",
    "DIGEST",
    "DIGEST_KINDS",
    "EVENING",
    "PULSE_4H",
    "ROUTINE_FIELDS",
    "SLOT_GRANULARITIES",
    "Routine",
    "digest_entry_fields",
    "digest_window",
]
