"""``ghostrunner backup --out DIR``: parse, call :func:`runner.backup.backup_deployment`, render; :mod:`runner.cli` adds it to its group."""

from __future__ import annotations

from pathlib import Path

import click

from journal.clikit import output_option, wants_json
from journal.errors import IntegrityError, JournalError
from runner._cli_support import Settings, config_option, echo, echo_json, raise_storage_failure
from runner.backup import DeploymentBackup, backup_deployment

__all__ = ["backup"]


def _show(report: DeploymentBackup) -> str:
    lines = [f"backed up into {report.out}"]
    for name, item in report.journals.items():
        if "same_as" in item:
            lines.append(f"  {name}: the journal of {item['same_as']}")
        elif item.get("missing"):
            lines.append(f"  {name}: no journal yet at {item['journal']}")
        else:
            verdict = "verified" if item["verify"]["ok"] else f"verify found {len(item['verify']['problems'])} problems"
            lines.append(f"  {name}: {item['files']} entry files, {verdict}")
    lines += [f"  {path}" for path in report.files]
    return "\n".join(lines)


@click.command()
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="The new directory to write the backup into (it must not exist yet).")
@config_option
@output_option
@click.pass_obj
def backup(settings: Settings, out: Path, config_path: Path | None) -> None:
    """Back up every configured agent's journal (online, verified), the configuration and the pause file into a new directory.

    Safe while serve or the timers run; suitable for a timer of its own. Exit 4 if a copy does not verify.

    Example: ghostrunner backup --out /var/backups/ghostrunner/2026-09-05
    """
    config = settings.config(config_path)
    try:
        report = backup_deployment(config, out)
    except OSError as exc:
        if isinstance(exc, JournalError):
            raise
        raise_storage_failure(exc, out, "write the backup to")
        raise
    if wants_json():
        echo_json(report.to_dict())
    else:
        echo(_show(report))
    if not report.is_clean:
        problems = [p for item in report.journals.values() for p in item.get("verify", {}).get("problems", [])]
        raise IntegrityError(len(problems), {"in the copies": len(problems)})
