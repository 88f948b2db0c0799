"""Where ``runner.lock_file`` may be: outside every journal, since the runner's state directory goes beside it.

The lock file and the state directory beside it (pauses, slot locks, the budget
ledger) are written by every run; inside an agent's journal they would be files
the journal never wrote, which its ``verify`` reports and its backups copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from journal.errors import OutputPathError
from journal.frame import refuse_inside_journals
from runner.settings._model import AgentConfig
from runner.settings._schema import FieldReader

__all__ = ["check_lock_file"]


def check_lock_file(reader: FieldReader, lock_file: Path, given: object, agents: Mapping[str, AgentConfig]) -> None:
    """Refuse *lock_file* (as *given* in the file, or None for the default beside the journal root) inside a journal.

    A journal is any configured agent's root, or any directory at or above the lock file holding a journal's
    manifest, judged as the kernel resolves the path (``..`` and linked directories followed).

    Raises:
        ConfigError: naming ``runner.lock_file``, the journal and the fix.
    """
    journals = {f"the journal of agent {name!r}": agent.journal_root for name, agent in sorted(agents.items())}
    try:
        refuse_inside_journals(lock_file, "the lock file", journals)
    except OutputPathError as exc:
        # exc.reason: "the lock file is inside <which journal>, which only the journal writes; name one outside it"
        raise reader.fail(
            "runner.lock_file",
            f"a path outside every journal, as runs write the lock and their state directory beside it: {exc.reason}",
            given if given is not None else str(lock_file),
        ) from None
