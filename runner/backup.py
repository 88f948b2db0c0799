"""``ghostrunner backup``: one new directory holding an online backup of every configured agent's journal, the configuration and the pause file.

Each journal is copied by :meth:`journal.Journal.backup` (consistent as of
its own instant while the runner writes, then verified); the configuration
file is copied as it was read, and the pause file as it is. Everything goes
into a hidden directory beside the target, renamed to it when complete, so
a failure leaves no target. Restoring is copying a journal directory back (it
is a journal as it stands) and putting the files back in place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journal import Journal, JournalNotFoundError
from journal.errors import UnsafePathError
from journal.outfile import replace_durably
from runner._configmodel import RunnerConfig
from runner.pauses import PauseBook

__all__ = ["DeploymentBackup", "backup_deployment"]


@dataclass(slots=True)
class DeploymentBackup:
    """What :func:`backup_deployment` copied: each agent's journal (with its check), the configuration and the pause file."""

    out: str
    journals: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        """True when every copied journal verified clean."""
        return all(item.get("verify", {}).get("ok", True) for item in self.journals.values())

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {"out": self.out, "ok": self.is_clean, "journals": self.journals, "files": self.files}


def _copy_file(source: Path, target: Path) -> None:
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace_durably(target, source.read_bytes())  # a private (0600) file, fsynced, whole or not at all


def backup_deployment(config: RunnerConfig, out: Path) -> DeploymentBackup:
    """Copy every configured agent's journal into ``out/journals/<agent>``, the configuration into ``out/config/``, the pause file into ``out/state/``.

    Raises:
        UnsafePathError: *out* exists already.
        JournalStorageError: the filesystem refused; nothing is left behind.
    """
    if os.path.lexists(out):
        raise UnsafePathError(out, "the backup directory exists; name a directory that does not exist yet (a backup never writes into or over anything)")
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    report = DeploymentBackup(str(out))
    try:
        os.chmod(work, 0o700)
        (work / "journals").mkdir(mode=0o700)
        copied: dict[Path, str] = {}
        for name, agent in sorted(config.agents.items()):
            root = Path(agent.journal_root)
            if root.resolve() in copied:  # agents sharing one journal: copied once
                report.journals[name] = {"same_as": copied[root.resolve()]}
                continue
            try:
                journal = Journal(root, create=False)
            except JournalNotFoundError:
                report.journals[name] = {"journal": str(root), "missing": True}
                continue
            with journal:
                made = journal.backup(work / "journals" / name)
            copied[root.resolve()] = name
            report.journals[name] = {"journal": str(root), **made.to_dict(), "out": f"journals/{name}"}
        if config.config_file is not None:
            _copy_file(config.config_file, work / "config" / config.config_file.name)
            report.files.append(f"config/{config.config_file.name}")
        pauses = PauseBook(config).path
        if pauses.is_file():
            _copy_file(pauses, work / "state" / pauses.name)
            report.files.append(f"state/{pauses.name}")
        os.rename(work, out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
        raise
    return report
