"""A ``ghostjournal`` run killed with SIGKILL at a chosen step of storing entries, for the tests that an interrupted import is finished by a rerun.

Run as ``python KILLER STEP AFTER ARGS...``: STEP is a method of ``EntryStore``, AFTER how many of its calls go
through first, ARGS the command line. ``write_temp`` is killed before the entry's temporary file is written;
any other step right after its call returns: ``publish`` once the entry file has its name (before its index rows
commit), ``sync_temp`` once a group's temporary files are on the disk (before any is named), ``sync_dirs`` once
a group's names are (before its index rows commit).
"""

from __future__ import annotations

__all__ = ["ERASE_KILLER", "IMPORT_KILLER"]

IMPORT_KILLER = """
import os, signal, sys
import journal.files.store as store
step, after = sys.argv[1], int(sys.argv[2])
original = getattr(store.EntryStore, step)
calls = [0]
def wrapped(self, *args, **kwargs):
    calls[0] += 1
    if step == "write_temp" and calls[0] == after + 1:
        os.kill(os.getpid(), signal.SIGKILL)  # the entry's temporary file is not written yet
    result = original(self, *args, **kwargs)
    if step != "write_temp" and calls[0] == after:
        os.kill(os.getpid(), signal.SIGKILL)  # the step is done, the index rows it leads to not committed
    return result
setattr(store.EntryStore, step, wrapped)
from journal.cli.cli import main
sys.argv = ["ghostjournal", *sys.argv[3:]]
main()
"""

#: ``python ERASE_KILLER STEP ARGS...``: a ``ghostjournal`` erase killed with SIGKILL at STEP: ``replace:before`` (nothing written
#: yet), ``replace:after`` (the tombstone is in place, the index rows not yet touched), ``delete_entry:after`` (the rows are deleted
#: in a transaction not committed) or ``scrub:before`` (the rows are gone, the index not yet rewritten).
ERASE_KILLER = """
import os, signal, sys
import journal.files.store as store
import journal.indexing.index as index
step = sys.argv[1]
name, when = step.split(":")
owner = store.EntryStore if name == "replace" else index.Index
original = getattr(owner, name)
def wrapped(self, *args, **kwargs):
    if when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    result = original(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
    return result
setattr(owner, name, wrapped)
from journal.cli.cli import main
sys.argv = ["ghostjournal", *sys.argv[2:]]
main()
"""
