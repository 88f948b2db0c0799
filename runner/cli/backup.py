"""``ghostrunner backup --out DIR`` or ``--into PARENT [--keep N]``: parse, call :mod:`runner.deploy.backup`, render; :mod:`runner.cli.cli` adds it to its group."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from journal.errors import IntegrityError, JournalError
from journal.frame.clikit import NamedPath, echo, output_option, wants_json
from runner.cli.support import Settings, config_option, echo_json, raise_storage_failure
from runner.errors import IncompleteBackupError

if TYPE_CHECKING:
    from runner.deploy.backup import DeploymentBackup

__all__ = ["backup"]


def _show(report: DeploymentBackup) -> str:
    lines = [f"backed up into {report.out}"]
    for name, item in report.journals.items():
        if "same_as" in item:
            lines.append(f"  {name}: the journal of {item['same_as']}")
        elif item.get("missing"):
            lines.append(f"  {name}: no journal yet at {item['journal']}")
        elif "error" in item:
            lines.append(f"  {name}: not copied ({item['journal']}): see the error")
        else:
            verdict = "verified" if item["verify"]["ok"] else f"verify found {len(item['verify']['problems'])} problems"
            lines.append(f"  {name}: {item['files']} entry files, {verdict}")
    lines += [f"  {path}" for path in report.files]
    lines += [f"  removed the older backup {name}" for name in report.pruned]
    return "\n".join(lines)


@click.command(short_help="Back up every agent's journal and the settings.")
@click.option(
    "--out",
    "out",
    type=NamedPath("a directory that does not exist yet", path_type=Path),
    help="The new directory to write the backup into (it must not exist yet).",
)
@click.option(
    "--into",
    "into",
    type=NamedPath("a directory to make the dated backup in", path_type=Path),
    help="Write the backup into a new ghostrunner-backup-YYYYMMDDTHHMMSSZ (UTC) directory of this one (made if missing).",
)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=None,
    help="With --into, after a clean backup: remove the backups there older than the newest N clean ones (only ones backup made).",
)
@config_option
@output_option
@click.pass_obj
def backup(settings: Settings, out: Path | None, into: Path | None, keep: int | None, config_path: Path | None) -> None:
    """Back up every configured agent's journal (online, verified), the configuration and the pause file into a new directory.

    Safe while serve or the timers run. --out names the new directory; --into a directory to make a new dated
    one in, as the backup timer does ([backup] in the configuration). A journal that cannot be copied (unreadable,
    a corrupt manifest, a file in its place) is one error line naming the agent and its path; the others are
    backed up still. Exit 4 if a journal could not be copied or a copy does not verify (and --keep then removes nothing).

    Example: ghostrunner backup --into /var/backups/ghostrunner --keep 7
    """
    if out is not None and into is None:
        target, dated = out, False
    elif into is not None and out is None:
        target, dated = into, True
    else:
        raise click.UsageError("pass either --out DIR (a new directory) or --into PARENT (a new dated directory in it)")
    if keep is not None and not dated:
        raise click.BadParameter("only with --into (a directory of dated backups to prune)", param_hint="--keep")
    config = settings.config(config_path)
    try:
        from runner.deploy.backup import backup_deployment, backup_into

        report = backup_into(config, target, keep=keep) if dated else backup_deployment(config, target)
    except OSError as exc:
        if isinstance(exc, JournalError):
            raise
        raise_storage_failure(exc, target, "write the backup to")
        raise
    if wants_json():
        echo_json(report.to_dict())
    else:
        echo(_show(report))
    for name, item in report.failed.items():  # one line each on stderr, before the error that sums them up
        click.echo(f"ghostrunner: error: agent {name!r}: cannot back up its journal {item['journal']!r}: {item['error']}", err=True)
    if not report.is_clean:
        problems = [p for item in report.journals.values() for p in item.get("verify", {}).get("problems", [])]
        if not report.failed:
            raise IntegrityError(len(problems), {"in the copies": len(problems)})
        raise IncompleteBackupError(report.out, list(report.failed), len(problems))
