"""The optional backup timer: the [backup] table, the units render makes of it, and `backup --into --keep`'s pruning."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from journal import Journal
from journal.errors import UnsafePathError
from runner.deploy.backup import MARKER, backup_into, prune_backups
from runner.deploy.systemd.units import refuse_warnings, render_units
from runner.errors import ConfigError, UnitRenderError
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, ghostrunner, tree_digest, write_config
from tests.journal._readme import readme_block
from tests.runner._units import ANALYZE, exec_path, render, verify

BACKUP = '\n[backup]\ndir = "./backups"\nschedule = "15 4 * * *"\nkeep = 3\n'
#: Absolute paths a sandbox shows, so that the rendering's only warnings are the ones a test provokes.
DEPLOYED = 'lock_file = "/var/lib/ghostrunner/serve.lock"\n'
AT = datetime(2026, 9, 5, 3, 30, tzinfo=UTC)


def _simulated(tmp_path: Path, body: str = "") -> Path:
    config = write_config(tmp_path, SIMPLE_AGENT + body)
    done = ghostrunner("--config", str(config), "simulate", "--agent", "motoko", "--days", "1", "--start", "2026-09-01", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return config


@pytest.mark.parametrize(("table", "key", "expected"), [
    ("keep = 3", "backup.dir", "the directory backups go into (required in [backup])"),
    ("dir = 5", "backup.dir", "a non-empty string"),
    ('dir = "./journal/backups"', "backup.dir", "a directory outside the journal of agent"),
    ('dir = "."', "backup.dir", "a directory outside the journal of agent"),
    ('dir = "b"\nschedule = "0 9 last * *"', "backup.schedule", "a five-field cron expression systemd's OnCalendar= can express"),
    ('dir = "b"\nschedule = "every night"', "backup.schedule", "a five-field cron expression that fires"),
    ('dir = "b"\nkeep = 0', "backup.keep", "an integer from 1 to 10000"),
    ('dir = "b"\nkeep = true', "backup.keep", "an integer from 1 to 10000"),
    ('dir = "b"\nevery = "1d"', "backup.every", "one of the keys dir, schedule, keep"),
], ids=["no-dir", "dir-number", "dir-in-journal", "dir-holding-journal", "schedule-inexpressible", "schedule-not-cron", "keep-0",
        "keep-bool", "unknown-key"])
def test_a_bad_backup_table_is_refused_naming_the_field(tmp_path: Path, table: str, key: str, expected: str) -> None:
    """Each bad [backup] value is a ConfigError naming its key and what it should be; the CLI says so in one line, exit 78, writing nothing."""
    config = write_config(tmp_path, SIMPLE_AGENT + "\n[backup]\n" + table + "\n")
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert raised.value.key == key and expected in str(raised.value)
    before = tree_digest(tmp_path)
    done = ghostrunner("systemd", "render", "--config", str(config), "--out", str(tmp_path / "units"), "--exec", exec_path(), cwd=tmp_path)
    assert done.returncode == 78 and done.stderr.startswith(f"ghostrunner: error: {config}: {key}: expected ") and done.stderr.count("\n") == 1
    assert tree_digest(tmp_path) == before


def test_without_a_backup_table_render_writes_what_it_did_and_with_one_adds_exactly_the_two_backup_units(tmp_path: Path) -> None:
    """The other units are byte for byte the same with or without [backup] (the checked-in units pin the output without it)."""
    plain = load_config(write_config(tmp_path, SIMPLE_AGENT))
    backed_up = load_config(write_config(tmp_path, SIMPLE_AGENT + BACKUP))
    without = render_units(plain, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/ghostrunner/ghostrunner.toml")
    with_backup = render_units(backed_up, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/ghostrunner/ghostrunner.toml")
    assert not any("backup" in name for name in without.files)
    assert set(with_backup.files) - set(without.files) == {"ghostrunner-backup.service", "ghostrunner-backup.timer"}
    assert {name: text for name, text in with_backup.files.items() if "backup" not in name} == without.files
    assert with_backup.timers == without.timers
    said = {name: ghostrunner("systemd", "render", "--config", str(write_config(tmp_path / name, body)), "--out", str(tmp_path / name / "u"),
                              "--exec", exec_path(), cwd=tmp_path) for name, body in (("plain", SIMPLE_AGENT), ("backup", SIMPLE_AGENT + BACKUP))}
    assert all(done.returncode == 0 for done in said.values())
    assert "ghostrunner-backup" not in said["plain"].stdout and "systemctl enable --now ghostrunner-backup.timer" in said["backup"].stdout


def test_the_backup_units_pass_systemd_analyze_verify_with_the_other_units_sandbox(tmp_path: Path) -> None:
    """Oneshot service with the serve unit's sandbox, no network, ReadWritePaths for the backups and journals, no Restart=; a persistent timer."""
    config = write_config(tmp_path, SIMPLE_AGENT + BACKUP, runner='timezone = "Europe/Berlin"\nlock_file = "./locks/serve.lock"\n')
    out = render(tmp_path, config)
    assert ANALYZE is not None
    result = verify(out, ["ghostrunner-backup.service", "ghostrunner-backup.timer"])
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    service = (out / "ghostrunner-backup.service").read_text()
    serve = (out / "ghostrunner.service").read_text()
    assert f"ExecStart={exec_path()} backup --into {tmp_path / 'backups'} --keep 3 --config {config}\n" in service
    sandbox = [line for line in serve.splitlines() if line.startswith(("Protect", "Private", "NoNewPrivileges", "SystemCall", "Capability",
                                                                       "User=", "UMask", "Restrict", "IPAddress"))]
    assert sandbox and all(f"\n{line}\n" in service for line in sandbox)
    [paths] = [line for line in service.splitlines() if line.startswith("ReadWritePaths=")]
    assert paths.split("=", 1)[1].split() == sorted(str(tmp_path / name) for name in ("backups", "journal", "locks"))
    assert "\nType=oneshot\n" in service and not any(line.startswith("Restart") for line in service.splitlines())
    timer = (out / "ghostrunner-backup.timer").read_text()
    assert "\nOnCalendar=*-*-* 04:15:00 Europe/Berlin\n" in timer and "\nPersistent=true\n" in timer and "PartOf" not in timer
    calendar = subprocess.run([ANALYZE, "calendar", "--iterations=2", "--base-time=@1788400000", "*-*-* 04:15:00 Europe/Berlin"],
                              check=False, capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": "UTC"})
    assert "02:15:00 UTC" in calendar.stdout  # 04:15 in Berlin's summer time


def _deployed(tmp_path: Path, directory: str) -> list[str]:
    body = SIMPLE_AGENT + f'\n[backup]\ndir = "{directory}"\n'
    config = load_config(write_config(tmp_path, body, runner=DEPLOYED).with_name("ghostrunner.toml"))
    config = config.with_journal_root("/var/lib/ghostrunner/{agent}")
    return list(render_units(config, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/ghostrunner/ghostrunner.toml").warnings)


def test_a_backup_directory_the_sandbox_hides_is_warned_about_and_strict_refuses(tmp_path: Path) -> None:
    """Under /home (ProtectHome) or /tmp (PrivateTmp), or a whole system directory: one warning naming it; --strict writes nothing, exit 78."""
    assert _deployed(tmp_path, "/var/backups/ghostrunner") == []
    [home] = _deployed(tmp_path, "/home/op/backups")
    assert home.startswith("the backup directory '/home/op/backups' is under /home, which ProtectHome=yes hides from the service")
    [private] = _deployed(tmp_path, "/var/tmp/backups")
    assert "under /var/tmp, which PrivateTmp=yes replaces with the service's own empty directory" in private
    [system] = _deployed(tmp_path, "/var")
    assert system.startswith("backup.dir '/var' is a system directory")
    config = load_config(write_config(tmp_path, SIMPLE_AGENT + '\n[backup]\ndir = "/home/op/backups"\n', runner=DEPLOYED))
    rendering = render_units(config.with_journal_root("/var/lib/ghostrunner/{agent}"), exec_argv=["/usr/local/bin/ghostrunner"],
                             config_path="/etc/ghostrunner/ghostrunner.toml")
    with pytest.raises(UnitRenderError) as refused:
        refuse_warnings(rendering)
    assert refused.value.exit_code == 78


def _made(parent: Path) -> list[str]:
    return sorted(path.name for path in parent.iterdir())


def test_keep_removes_only_older_backups_it_made_and_follows_no_symbolic_link(tmp_path: Path) -> None:
    """Beside real backups: a look-alike without the marker, a link to a backup, a backup whose marker is a link, a dated file, a link inside a
    backup to a journal outside. keep=2 removes the oldest real backup only, and what the link inside pointed at is untouched."""
    config = load_config(_simulated(tmp_path))
    parent = tmp_path / "backups"
    first = backup_into(config, parent, now=AT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(parent / Path(first.out).name, elsewhere / "real-backup")
    (Path(first.out) / "journals" / "outside").symlink_to(tmp_path / "journal")  # inside the backup that will be removed
    (parent / "ghostrunner-backup-20000101T000000Z").mkdir()  # older, dated, but no marker: not ours
    (parent / "ghostrunner-backup-20000101T000000Z" / "notes.txt").write_text("keep me")
    (parent / "ghostrunner-backup-20000102T000000Z").symlink_to(elsewhere / "real-backup", target_is_directory=True)
    linked = parent / "ghostrunner-backup-20000103T000000Z"
    linked.mkdir()
    (linked / MARKER).symlink_to(elsewhere / "real-backup" / MARKER)
    (parent / "ghostrunner-backup-20000104T000000Z").write_text("a file")
    (parent / "mine").mkdir()
    foreign = {name for name in _made(parent) if name != Path(first.out).name}
    source_before = tree_digest(tmp_path / "journal")
    elsewhere_before = tree_digest(elsewhere)
    second = backup_into(config, parent, keep=2, now=AT + timedelta(days=1))
    assert second.pruned == []
    third = backup_into(config, parent, keep=2, now=AT + timedelta(days=2))
    assert third.pruned == [Path(first.out).name]
    assert set(_made(parent)) == foreign | {Path(second.out).name, Path(third.out).name}
    assert (parent / "ghostrunner-backup-20000101T000000Z" / "notes.txt").read_text() == "keep me"
    assert tree_digest(tmp_path / "journal") == source_before and tree_digest(elsewhere) == elsewhere_before
    with Journal(Path(third.out) / "journals" / "motoko", create=False) as journal:
        assert journal.verify().is_clean


def test_a_backup_that_did_not_verify_is_kept_while_newer_than_the_kept_clean_ones(tmp_path: Path) -> None:
    """keep counts clean backups: one whose marker says it did not verify stays while newer than the keep-th clean one, and goes after it."""
    config = load_config(_simulated(tmp_path))
    parent = tmp_path / "backups"
    names = [Path(backup_into(config, parent, now=AT + timedelta(hours=hour)).out).name for hour in range(4)]
    marker = parent / names[2] / MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "ok": False}))  # as a copy that found a problem records itself
    assert prune_backups(parent, 2) == names[:1]
    assert _made(parent) == names[1:]
    assert prune_backups(parent, 1) == [names[1], names[2]]
    assert prune_backups(parent, 1) == []


def test_two_backups_in_one_second_get_their_own_names_and_a_linked_parent_is_refused(tmp_path: Path) -> None:
    """Runs within one second are -2, -3 (pruned in that order); a parent that is a symbolic link is refused, by backup and by pruning."""
    config = load_config(_simulated(tmp_path))
    parent = tmp_path / "backups"
    names = [Path(backup_into(config, parent, now=AT).out).name for _ in range(3)]
    assert names == ["ghostrunner-backup-20260905T033000Z", "ghostrunner-backup-20260905T033000Z-2", "ghostrunner-backup-20260905T033000Z-3"]
    assert prune_backups(parent, 1) == names[:2]
    (tmp_path / "link").symlink_to(parent, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        backup_into(config, tmp_path / "link", keep=1, now=AT + timedelta(days=1))
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        prune_backups(tmp_path / "link", 1)
    assert _made(parent) == names[2:]


def test_the_cli_refuses_keep_without_into_both_targets_and_a_linked_parent(tmp_path: Path) -> None:
    """Usage errors exit 2, a --into that is a symbolic link exits 1: one line each, nothing written."""
    config = _simulated(tmp_path)
    before = tree_digest(tmp_path)
    for args in (["--out", "x", "--keep", "2"], ["--out", "x", "--into", "y"], [], ["--into", "y", "--keep", "0"]):
        done = ghostrunner("--config", str(config), "backup", *args, cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, (args, done.stderr)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    before = tree_digest(tmp_path)
    linked = ghostrunner("--config", str(config), "backup", "--into", "link", "--keep", "1", cwd=tmp_path)
    assert linked.returncode == 2 and linked.stderr.count("\n") == 1
    assert linked.stderr.startswith("ghostrunner: error: refused 'link': the backups' directory is a symbolic link")
    assert tree_digest(tmp_path) == before


def test_the_readme_backup_into_block_runs_as_written(tmp_path: Path) -> None:
    """The `backup --into` lines of docs/runner.md, run in order: two dated backups, then the older pruned by --keep 1."""
    _simulated(tmp_path)
    block = readme_block("Backups on a schedule", page="docs/runner.md")
    assert len(block) == 2, block
    bin_dir = str(Path(exec_path()).parent)
    outputs = []
    for line in [block[0], block[0], block[1]]:
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
                              env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GHOSTRUNNER_CONFIG": "ghostrunner.toml"})
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    reports = [json.loads(output) for output in outputs[:2]]
    assert all(report["ok"] for report in reports)
    kept = [Path(report["out"]).name for report in reports][1:]
    assert sorted(path.name for path in (tmp_path / "backups").iterdir()) == kept
    assert json.loads(outputs[2])["ok"] is True
