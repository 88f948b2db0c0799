"""The ``[backup]`` table of the configuration, checked field by field (see :class:`runner.settings.config.BackupConfig`).

Layout::

    [backup]                          # optional: without it render writes no backup units
    dir = "/var/backups/ghostrunner"  # each run makes a new ghostrunner-backup-YYYYMMDDTHHMMSSZ directory in it
    schedule = "30 3 * * *"           # when the timer fires: cron, in runner.timezone (default 03:30 daily)
    keep = 7                          # after a clean backup, older ones beyond the newest 7 clean ones are removed

The schedule is checked as a routine's is, and also for an exact
``OnCalendar=`` equivalent (:mod:`runner.cron.oncalendar`): the table exists for
the timer, so a schedule the timer cannot express is refused when the file
is read, not only when the units are rendered.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Final
from zoneinfo import ZoneInfo

from runner.cron.oncalendar import ScheduleNotExpressibleError, to_on_calendar
from runner.cron.slots import cron_trigger
from runner.settings._model import AgentConfig, BackupConfig
from runner.settings._schema import FieldReader

__all__ = ["BACKUP_KEYS", "read_backup"]

BACKUP_KEYS: Final = ("dir", "schedule", "keep")
#: More backups than this kept is a disk filling slowly, not a retention policy.
_MAX_KEEP: Final = 10000


def _overlaps(first: str, second: str) -> bool:
    """True when one of the two paths is the other or inside it, lexically (without '..') or once symbolic links are resolved."""
    for resolve in (os.path.normpath, os.path.realpath):
        one, other = PurePosixPath(resolve(first)), PurePosixPath(resolve(second))
        if one.is_relative_to(other) or other.is_relative_to(one):
            return True
    return False


def read_backup(reader: FieldReader, value: object, agents: Mapping[str, AgentConfig], tz: ZoneInfo) -> BackupConfig:
    """The checked ``[backup]`` table *value*.

    Raises:
        ConfigError: the first problem, naming the key.
    """
    data: dict[str, Any] = reader.table(value, "backup", BACKUP_KEYS)
    if "dir" not in data:
        raise reader.fail(
            "backup.dir", "the directory backups go into (required in [backup]), such as '/var/backups/ghostrunner'", "nothing"
        )
    directory = reader.path(data["dir"], "backup.dir", state=True)
    for name, agent in sorted(agents.items()):
        # A backup inside a journal would be copied by the next backup of that journal, and the journal refuses it.
        # Judged as written without '..' and as this host resolves its links: 'other/../journal/b' and 'link/b' are inside too.
        if _overlaps(str(directory), str(agent.journal_root)):
            raise reader.fail(
                "backup.dir",
                f"a directory outside the journal of agent {name!r} ({str(agent.journal_root)!r}) and not holding it",
                data["dir"],
            )
    fields: dict[str, Any] = {"dir": directory}
    if "schedule" in data:
        schedule = reader.string(data["schedule"], "backup.schedule")
        try:
            cron_trigger(schedule, tz)
            to_on_calendar("backup", schedule, tz)
        except ScheduleNotExpressibleError as exc:
            raise reader.fail(
                "backup.schedule", f"a five-field cron expression systemd's OnCalendar= can express ({exc.reason})", schedule
            ) from None
        except ValueError as exc:
            raise reader.fail(
                "backup.schedule", f"a five-field cron expression that fires, such as '30 3 * * *' ({exc})", schedule
            ) from None
        fields["schedule"] = schedule
    if "keep" in data:
        fields["keep"] = reader.positive_int(data["keep"], "backup.keep", maximum=_MAX_KEEP)
    return BackupConfig(**fields)
